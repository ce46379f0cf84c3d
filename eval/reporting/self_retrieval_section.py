"""The report's self-retrieval section (Liu et al. 2018; issue #66): the joint spaces' i2t / t2i table, and for a few
test images the plain SCST run's caption beside the self-retrieval run's, each with the image it retrieves first.

Pairs are Table 1's rows of one model and features trained RL and RL+SR, both with a ``self_retrieval_test.json``
(eval.self_retrieval). The images shown are chosen by their ranks, half where the self-retrieval caption finds its
own image better than the baseline's and half where it does worse (the largest differences each way), so the section
shows both directions, not only the wins.
"""
from __future__ import annotations

import json
from pathlib import Path

from capcore.run_layout import RunDir
from eval.reporting.html import Cell, Section, code, esc, table
from eval.reporting.inputs import CaptionRun, karpathy_refs

FIX = ("add a joint: entry and an SCST config with retrieval.weight > 0 to the pipeline config "
       "(configs/demo/pipeline_demo.yaml has both)")
JOINT_HEAD = ["Set", "Images", "i2t R@1", "i2t R@5", "i2t R@10", "t2i R@1", "t2i R@5", "t2i R@10", "rsum"]


def _records(run: CaptionRun) -> dict[int, dict] | None:
    path = Path(run.run_dir) / "self_retrieval_test.json" if run.run_dir else None
    if path is None or not path.is_file():
        return None
    return {int(r["image_id"]): r for r in json.loads(path.read_text())["per_image"]}


def pairs_of(runs: list[CaptionRun]) -> list[tuple[CaptionRun, CaptionRun, dict, dict]]:
    """(RL run, RL+SR run, their per-image records) for each model and features with both."""
    by_key = {r.key: r for r in runs}
    out = []
    for (model, feats, training), sr in by_key.items():
        base = by_key.get((model, feats, "RL"))
        if training == "RL+SR" and base is not None:
            a, b = _records(base), _records(sr)
            if a and b:
                out.append((base, sr, a, b))
    return out


def chosen(a: dict, b: dict, n: int) -> list[int]:
    """Half the images where SR ranks its own image better than the baseline by the most, half where worse (the
    other side fills in when one has too few); ties by image id."""
    common = sorted(set(a) & set(b))
    gain = {i: a[i]["rank"] - b[i]["rank"] for i in common}
    better = [i for i in sorted(common, key=lambda i: (-gain[i], i)) if gain[i] > 0]
    worse = [i for i in sorted(common, key=lambda i: (gain[i], i)) if gain[i] < 0]
    k_better = min(len(better), (n + 1) // 2)
    k_worse = min(len(worse), n - k_better)
    k_better = min(len(better), n - k_worse)  # one side short: the other fills the rest
    return better[:k_better] + worse[:k_worse]


def joint_table(ctx, sec: Section) -> None:
    folder = RunDir(ctx.run).results("joint")
    rows = []
    for path in sorted(folder.glob("*.json")) if folder.is_dir() else []:
        m = json.loads(path.read_text())
        f = m.get("full") or {}
        rows.append([path.stem, Cell(str(m.get("n_images", "?")), ("num",))]
                    + [Cell(f"{f[k]:.1f}", ("num",)) for k in ("i2t_r1", "i2t_r5", "i2t_r10", "t2i_r1", "t2i_r5",
                                                              "t2i_r10", "rsum")])
    if not rows:
        sec.note_missing(f"{ctx.shown(folder)}/*.json (the joint stage's test scores)", FIX)
        return
    sec.add(table(JOINT_HEAD, rows))
    sec.add(f"<p class=note>The joint spaces on the test split (joint/recall.py; R@K in percent), from "
            f"{code(ctx.shown(folder))}: the spaces whose cosine is the self-retrieval reward.</p>")


def _picture(ctx, files: dict, image_id: int) -> str:
    from eval.reporting.figures import thumbnail

    src = files.get(image_id)
    if src is None or not Path(src).is_file():
        return "(image file not found)"
    rel = f"img/self_retrieval/{image_id}.png"
    thumbnail(Path(src), ctx.target(rel), size=96)
    return f'<img src="{esc(rel)}" alt="image {image_id}">'


def section_self_retrieval(ctx, captioning) -> Section:
    sec = Section("9. Self-retrieval (Liu et al. 2018)")
    _, runs, _ = captioning
    pairs = pairs_of(runs)
    if not pairs and not RunDir(ctx.run).results("joint").is_dir():  # no text side in this run: one note
        sec.note_missing("the joint stage's results (results/joint/) and a self-retrieval SCST run", FIX)
        return sec
    joint_table(ctx, sec)
    if not pairs:
        sec.note_missing("an RL and an RL+SR run of one model and features, each with self_retrieval_test.json", FIX)
        return sec
    base, sr, a, b = pairs[0]
    refs_file = next((r.refs for r in (base, sr) if r.refs is not None), None)
    _, files = karpathy_refs(refs_file) if refs_file else ({}, {})
    sec.add(f"<p class=note>{esc(base.label)} beside {esc(sr.label)}: each test image's caption, the rank of its own "
            f"image among the {len(a)} test images when the caption is the query (1: found first), and the image "
            f"it finds first. Half the images are where the self-retrieval caption does better, half where it does "
            f"worse (the largest differences each way).</p>")
    lines = []
    for image_id in chosen(a, b, ctx.examples):
        for run, rec in ((base, a), (sr, b)):
            r = rec[image_id]
            lines.append([Cell(_picture(ctx, files, image_id), raw=True) if run is base else "",
                          run.row.get("training", "?"), run.preds.get(image_id, ""),
                          Cell(str(r["rank"] + 1), ("num",)), Cell(_picture(ctx, files, r["retrieved"]), raw=True)])
    sec.add(table(["image", "training", "caption", "own image's rank", "retrieves first"], lines))
    return sec
