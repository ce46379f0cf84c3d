"""The captioning sections of eval.reporting.report: Table 1, caption examples (Fig. 8) and attention maps.

All three take ``eval.reporting.inputs.load_captioning(RUN)``: ``RUN/results/captioning/captioning.json``
(eval.reporting.results_table), whose rows name the predictions file, whose folder is the captioner run
(preds, per-image scores, attention/*.png).
"""
from __future__ import annotations

import json
from collections import defaultdict

import numpy as np

from capcore.run_layout import CaptionerDir
from eval.reporting import columns
from eval.reporting.html import Cell, Section, anchor, code, esc, figure, table
from eval.reporting.inputs import CaptionRun, karpathy_refs, sort_key
from eval.reporting.results_table import BESIDE, COLUMNS

TABLE_FIX = ("python -m eval.reporting.results_table CAPTIONER_RUN... --out RUN/results/captioning (after "
             "scripts/stage3_captioners.sh / stage3_rl.sh; scripts/demo.sh runs it)")
STAGE3 = "scripts/stage3_captioners.sh CONFIG (XE) or scripts/stage3_rl.sh CONFIG (RL)"


def section_table1(ctx, captioning) -> Section:
    sec = Section("1. Captioning results (Table 1)")
    data, _, path = captioning
    if data is None or not data["rows"]:
        sec.note_missing(f"{ctx.shown(path)} (Table 1 rows)", TABLE_FIX)
        return sec
    rows = data["rows"]
    best = {}
    for col in COLUMNS:
        for r in rows:
            if isinstance(r.get(col), (int, float)):
                best[(r.get("model"), col)] = max(best.get((r.get("model"), col), -np.inf), r[col])
    cells, prev = [], (None, None)
    for r in rows:
        model, feats = r.get("model", "?"), r.get("features", "?")
        line = ["" if model == prev[0] else model, "" if (model, feats) == prev else feats, r.get("training", "?")]
        prev = (model, feats)
        for col in COLUMNS:
            v = r.get(col)
            line.append(Cell("n/a", ("num",)) if not isinstance(v, (int, float)) else
                        Cell(f"{v:.{columns.digits(col)}f}", ("num", "best") if v == best[(model, col)] else ("num",)))
        for col in BESIDE:
            v = r.get(col)
            line.append(Cell("n/a" if not isinstance(v, (int, float)) else f"{v:.2f}", ("num",)))
        line += [Cell(str(r.get("n_images", "?")), ("num",)), r.get("decoding", "?")]
        cells.append(line)
    sec.add(table(["Model", "Features", "Training", *COLUMNS, *BESIDE, "Images", "Decoding"], cells))
    links = []
    for name in ("captioning.csv", "captioning.json", "captioning.md"):
        if (path.parent / name).is_file():
            links.append(f'<a href="{esc(ctx.copy(path.parent / name, f"data/captioning/{name}"))}">{name}</a>')
    notes = "".join(f"<li>{esc(n)}</li>" for n in data.get("notes", []))
    sec.add(f"<p class=note>{esc(columns.legend(signature=False))} Bold: best per model. "
            f"From {code(ctx.shown(path))}, written by "
            f"{code(data.get('command') or 'python -m eval.reporting.results_table')}. Data: {', '.join(links)}.</p>"
            + (f"<ul class=note>{notes}</ul>" if notes else ""))
    curves(ctx, sec, captioning[1])
    return sec


def curves(ctx, sec: Section, runs: list[CaptionRun]) -> None:
    """Val CIDEr-D after every epoch of each run (``history.json``): XE until it stopped rising, and
    SCST from its XE start (epoch 0). The same values are TensorBoard's val/cider_d."""
    from eval.reporting.figures import _plt

    histories = {}
    for run in runs:
        path = CaptionerDir(run.run_dir).history if run.run_dir else None
        if path is not None and path.is_file():
            rows = json.loads(path.read_text())
            histories[run.label] = ([h["epoch"] for h in rows], [h["cider_d"] for h in rows], run.key[2])
    if not histories:
        return
    plt = _plt()
    fig, axes = plt.subplots(1, 2, figsize=(10, 3.6))
    for label, (epochs, scores, training) in histories.items():
        ax = axes[0 if training == "XE" else 1]
        ax.plot(epochs, scores, marker="o", ms=3, label=label.rsplit(" / ", 1)[0])
    for ax, title in zip(axes, ("cross-entropy (stops when val CIDEr-D stops rising)", "SCST (epoch 0: the XE start)")):
        ax.set_title(title, fontsize=9)
        ax.set_xlabel("epoch")
        ax.set_ylabel("val CIDEr-D")
        ax.grid(alpha=0.3)
        ax.legend(fontsize=7)
    fig.tight_layout()
    rel = "img/captioning/val_cider.png"
    fig.savefig(ctx.target(rel), dpi=110)
    plt.close(fig)
    sec.add(figure(rel, "val CIDEr-D per epoch", "Val CIDEr-D (greedy) after each epoch of every captioner run, "
                   "from its <code>history.json</code> (also TensorBoard's <code>val/cider_d</code> under the run's "
                   "<code>tb/</code>); <code>best.pt</code> is each curve's maximum."))


def _cider(run: CaptionRun, image_id: int) -> float | None:
    v = run.per_image.get(image_id, {}).get("CIDEr-D")
    return float(v) if isinstance(v, (int, float)) else None


def choose_examples(runs: list[CaptionRun], n: int) -> tuple[list[int], dict[int, float], str]:
    """Deterministic picks: half where Cap beats Img most in per-image CIDEr-D (mean over the model x
    training pairs that have both), half where Img beats Cap most; the first n test images without scores."""
    ids = [i for i in runs[0].preds if all(i in r.preds for r in runs)]
    by_key = {r.key: r for r in runs}
    diffs: dict[int, list[float]] = defaultdict(list)
    for (model, feats, training), cap in by_key.items():
        img = by_key.get((model, columns.BASELINE, training))
        if feats != "Cap" or img is None:
            continue
        for i in ids:
            c, b = _cider(cap, i), _cider(img, i)
            if c is not None and b is not None:
                diffs[i].append(c - b)
    if not diffs:
        return ids[:n], {}, f"the first {min(n, len(ids))} images of the predictions file (no per-image scores)"
    score = {i: float(np.mean(d)) for i, d in diffs.items()}
    cap_better = sorted(score, key=lambda i: (-score[i], i))[:n // 2]
    rest = [i for i in score if i not in cap_better]
    img_better = sorted(rest, key=lambda i: (score[i], i))[:n - len(cap_better)]
    return cap_better + img_better, score, (
        f"the {len(cap_better)} images where Cap features beat Img most and the {len(img_better)} where Img beat Cap "
        f"most, by per-image CIDEr-D (Cap - Img, averaged over the model and training pairs with both)")


def section_examples(ctx, captioning) -> Section:
    from eval.reporting.figures import thumbnail

    sec = Section("7. Caption examples (Fig. 8)")
    data, runs, path = captioning
    runs = [r for r in runs if r.preds]
    if data is None or not runs:
        what = f"{ctx.shown(path)}" if data is None else "the predictions files named in captioning.json"
        sec.note_missing(f"{what} (captions to show)", TABLE_FIX if data is None else STAGE3)
        return sec
    ids, score, how = choose_examples(runs, ctx.examples)
    refs_file = next((r.refs for r in runs if r.refs is not None), None)
    refs, files = karpathy_refs(refs_file) if refs_file else ({}, {})
    if refs_file is None:
        sec.note_missing("the Karpathy json with the ground-truth captions and image paths (refs of the metrics "
                         "files, data.json of the run's config.yaml)", STAGE3)
    models = list(dict.fromkeys(r.row.get("model", "?") for r in runs))  # Table 1 order
    sources = "; ".join(f"{esc(r.label)}: {code(ctx.shown(r.preds_file))}" for r in runs)
    sec.add(f"<p class=note>Shown: {esc(how)}. Each caption with its per-image CIDEr-D. Captions from the predictions "
            f"files ({code('python -m captioners.predict')}, {esc(runs[0].row.get('decoding', '?'))}): {sources}. "
            f"Ground truth and images from {code(ctx.shown(refs_file))}.</p>")
    for image_id in ids:
        lines, classes = [], []
        gt = refs.get(image_id)
        if gt:
            lines.append([Cell("GT"), Cell("<br>".join(esc(g) for g in gt), raw=True), ""])
            classes.append("bound")
        for model in models:
            for run in sorted((r for r in runs if r.row.get("model") == model), key=sort_key):
                c = _cider(run, image_id)
                lines.append([f"{model} · {run.row.get('features')} {run.row.get('training')}",
                              run.preds.get(image_id, ""), Cell("-" if c is None else f"{c:.2f}", ("num",))])
                classes.append("")
        src = files.get(image_id)
        rel = f"img/captions/{image_id}.png"
        picture = "<p class=note>(image file not found)</p>"
        if src is not None and src.is_file():
            try:
                thumbnail(src, ctx.target(rel))
                picture = f'<img src="{esc(rel)}" alt="image {image_id}">'
            except OSError:
                picture = "<p class=note>(image file unreadable)</p>"
        diff = f" · Cap − Img CIDEr-D {score[image_id]:+.2f}" if image_id in score else ""
        sec.add(f"<h3>Image {image_id}{diff}</h3><div class=example>{picture}"
                + table(["model · features training", "caption", "CIDEr-D"], lines, classes) + "</div>")
    return sec


def section_attention(ctx, captioning) -> Section:
    sec = Section("8. Attention maps (Fig. 16)")
    data, runs, path = captioning
    if data is None or not runs:
        sec.note_missing(f"{ctx.shown(path)} (which captioner runs to show)", TABLE_FIX)
        return sec
    sec.add("<p class=note>Per word, where the captioner attended (each panel scaled to its own maximum, printed "
            "under the word). Written by " + code("python -m eval.attention_maps --attention RUN_DIR/attention_test.h5 "
                                                  "--refs DATASET_JSON --out RUN_DIR/attention") + ".</p>")
    for run in runs:
        folder = CaptionerDir(run.run_dir).attention_pictures if run.run_dir else None
        pngs = sorted(folder.glob("*.png")) if folder and folder.is_dir() else []
        sec.add(f"<h3>{esc(run.label)}</h3>")
        if not pngs:
            sec.note_missing(f"attention maps of {run.label} ({ctx.shown(folder) if folder else 'run folder not found'}"
                             f"/*.png)", STAGE3)
            continue
        sec.add("<div class=gallery>")
        for png in pngs:
            ctx.add_image(sec, png, f"img/attention/{anchor(run.label)}/{png.name}", png.stem,
                          f"{esc(run.label)}: {code(ctx.shown(png))}", "attention map", STAGE3)
        sec.add("</div>")
    return sec
