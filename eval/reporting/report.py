"""A static HTML report of one pipeline run: ``python -m eval.reporting.report --run RUN [--out RUN/report]``.

Reads what the stages left under RUN (``results/<study>/retrieval.json`` and their PNGs,
``results/captioning/captioning.json`` and the captioner run folders its rows name; see
eval.reporting.inputs) and writes ``index.html`` with every picture it shows copied or drawn beside it,
relative links only, inline CSS: the folder reads offline and can be zipped or moved. Sections follow
the paper: Table 1, retrieval tables (Fig. 3 numbers), curves (Fig. 3), retrieval grids (Fig. 4/6/7),
the dimension sweep (Fig. 5), a t-SNE map of pose embeddings, caption examples (Fig. 8) and attention
maps (Fig. 16). A missing input becomes a note naming the stage that writes it, never a broken
image. The folder is written under a temporary name and renamed, so no half-written report is left.
Check it renders with ``python -m eval.reporting.check RUN/report/index.html``.
"""
from __future__ import annotations

import argparse
import contextlib
import os
import re
import shlex
import shutil
import sys
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from PIL import Image

from capcore.errors import CapawareError, run_cli
from capcore.run_layout import RunDir
from embedder.retrieval_report import BOUNDS, TABLE_K, plot_curves
from eval.reporting.caption_sections import section_attention, section_examples, section_table1
from eval.reporting.self_retrieval_section import section_self_retrieval
from eval.reporting.html import Cell, Section, anchor, code, esc, figure, page, table
from eval.reporting.inputs import (
    TRACKS,
    Study,
    load_captioning,
    load_embeddings,
    load_studies,
    pose_labels,
    shown,
)

MARKER = ".capaware-report"  # marks a folder this module wrote, so --out never replaces anything else
STAGE1 = "scripts/stage1_embedder.sh CONFIG (python -m embedder.rows --config CONFIG --results RUN/results)"


@dataclass
class Context:
    """Where the report reads from (``run``) and writes to (``out``, the temporary folder)."""
    run: Path
    out: Path
    command: str
    examples: int = 6
    # a random subset: a 2-D map of 1,500 pose items took 5 s (issue #36; 2-core AMD EPYC Zen 5 held to AVX2)
    tsne_points: int = 800

    def shown(self, path) -> str:
        return shown(path, self.run)

    def target(self, rel: str) -> Path:
        path = self.out / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        return path

    def copy(self, src: Path, rel: str) -> str | None:
        """Copy a file into the report; an image only when it decodes (else None: show a note)."""
        if src.suffix.lower() == ".png":
            try:
                with Image.open(src) as im:
                    im.verify()
            except Exception:  # noqa: BLE001 - any undecodable file becomes a "missing" note
                return None
        shutil.copyfile(src, self.target(rel))
        return rel

    def add_image(self, section: Section, src: Path | None, rel: str, alt: str, caption: str,
                  what: str, fix: str) -> None:
        """A figure of ``src`` copied to ``rel``, or the section's missing note when it is absent/unreadable."""
        got = self.copy(src, rel) if src is not None and src.is_file() else None
        if got is None:
            state = "unreadable" if src is not None and src.is_file() else "not found"
            section.note_missing(f"{what} ({self.shown(src) if src else '?'}: {state})", fix)
        else:
            section.add(figure(got, alt, caption))


@contextlib.contextmanager
def atomic_folder(dest: Path) -> Iterator[Path]:
    """Yield a temporary sibling folder; on success it replaces ``dest`` (a previous report) by renames."""
    if dest.exists() and not (dest / MARKER).is_file() and any(dest.iterdir()):
        raise CapawareError(dest, "exists and is not a report folder written by eval.reporting.report",
                            "pass another --out, or remove that folder")
    dest.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{dest.name}.", suffix=".tmp", dir=dest.parent))
    old = None
    try:
        yield tmp
        (tmp / MARKER).write_text("written by python -m eval.reporting.report; replaced whole on the next run\n")
        os.chmod(tmp, 0o755)
        if dest.exists():
            old = dest.with_name(f".{dest.name}.old-{os.getpid()}")
            os.replace(dest, old)
        os.replace(tmp, dest)
    finally:
        for leftover in (tmp, old):
            if leftover is not None and leftover.exists():
                shutil.rmtree(leftover, ignore_errors=True)


# ------------------------------------------------------------------------------- retrieval sections


def _num(v: float, best: bool) -> Cell:
    return Cell(f"{v:.3f}", ("num", "best") if best else ("num",))


def retrieval_table(study: Study) -> str:
    """The study's table at the K columns retrieval.md uses; best method value in bold."""
    ks = [k for k in TABLE_K if k <= study.k_max]
    bounds = set(BOUNDS) | {study.baseline()}
    methods = [n for n in study.rows if n not in bounds] or list(study.rows)
    best_ndcg = {k: max(study.rows[n]["ndcg"][k - 1] for n in methods) for k in ks}
    best_dist = {k: min(study.rows[n]["mean_dist"][k - 1] for n in methods) for k in ks}
    rows, classes = [], []
    for name, r in study.rows.items():
        mine = name in methods
        rows.append([name] + [_num(r["ndcg"][k - 1], mine and r["ndcg"][k - 1] == best_ndcg[k]) for k in ks]
                    + [_num(r["mean_dist"][k - 1], mine and r["mean_dist"][k - 1] == best_dist[k]) for k in ks])
        classes.append("bound" if not mine else "")
    head = ["method"] + [f"nDCG@{k}" for k in ks] + [f"dist@{k}" for k in ks]
    return table(head, rows, classes)


def study_source(ctx: Context, study: Study) -> str:
    where = f"; study folder {code(ctx.shown(study.run_dir))} (its config.yaml)" if study.run_dir else ""
    return (f"From {code(ctx.shown(study.results_dir / 'retrieval.json'))}, written by "
            f"{code('python -m embedder.rows')} (embedder.retrieval_report.write_report){where}.")


def section_retrieval_tables(ctx: Context, studies: list[Study]) -> Section:
    sec = Section("2. Retrieval tables (Fig. 3 numbers)")
    sec.add("<p class=note>nDCG@K with relevance r = -log2(d + 1) (Eq. 12; higher is better) and dist@K, the mean "
            "label distance of the top K (lower is better). Oracle ranks by the labels themselves (upper bound), "
            "the untrained/baseline row embeds with the initial network (lower bound); both in grey. Bold: the "
            "best trained method per column.</p>")
    main = [s for s in studies if not s.sweep]
    for track in TRACKS + tuple(sorted({s.track for s in main} - set(TRACKS))):
        mine = [s for s in main if s.track == track]
        if not mine and track in TRACKS:
            sec.note_missing(f"no {track}-track retrieval study under {ctx.shown(ctx.run / 'results')}",
                             f"{STAGE1}, with a config whose data.track is {track}")
        for study in mine:
            links = []
            for name in ("retrieval.json", "retrieval.md"):
                if (study.results_dir / name).is_file():
                    rel = ctx.copy(study.results_dir / name, f"data/{anchor(study.name)}/{name}")
                    links.append(f'<a href="{esc(rel)}">{name}</a>')
            q = next(iter(study.rows.values())).get("n_queries", "?")
            sec.add(f"<h3>{esc(study.title)}</h3>" + retrieval_table(study)
                    + f"<p class=note>{q} queries. {study_source(ctx, study)} Data: {', '.join(links)}.</p>")
    return sec


def main_studies(sec: Section, studies: list[Study]) -> list[Study]:
    """The studies with retrieval curves and grids (not dimension sweeps); noted in ``sec`` if none."""
    main = [s for s in studies if not s.sweep]
    if not main:
        sec.note_missing("no retrieval study under RUN/results", STAGE1)
    return main


def section_curves(ctx: Context, studies: list[Study]) -> Section:
    sec = Section("3. nDCG@K and mean label distance@K (Fig. 3)")
    main = main_studies(sec, studies)
    for study in main:
        src, rel = study.results_dir / "curves.png", f"img/{anchor(study.name)}/curves.png"
        how = f"{code(ctx.shown(src))} (embedder.retrieval_report.plot_curves)"
        if not (src.is_file() and ctx.copy(src, rel)):
            plot_curves(study.rows, ctx.target(rel), study.title)
            how = f"re-plotted by eval.reporting.report from retrieval.json ({code(ctx.shown(src))} was missing)"
        sec.add(figure(rel, f"curves {study.name}",
                       f"<b>{esc(study.title)}</b>: left, mean label distance of the top K (lower is better); right, "
                       f"nDCG@K (higher is better); dashed: Oracle and Untrained bounds. Image: {how}. "
                       + study_source(ctx, study)))
    return sec


def _query_number(path: Path) -> int:
    match = re.search(r"(\d+)", path.stem)
    return int(match.group(1)) if match else 0


def section_grids(ctx: Context, studies: list[Study]) -> Section:
    sec = Section("4. Retrieval examples (Fig. 4, 6, 7)")
    main = main_studies(sec, studies)
    for study in main:
        grids = sorted(study.results_dir.glob("grid_query*.png"), key=_query_number)
        sec.add(f"<h3>{esc(study.title)}</h3>")
        if not grids:
            sec.note_missing(f"retrieval grids of {study.name} ({ctx.shown(study.results_dir)}/grid_query*.png)",
                             "python -m embedder.rows (embedder.retrieval_grid.write_grids), or python -m "
                             f"embedder.retrieval_grid STUDY_FOLDER/retrieval --out {ctx.shown(study.results_dir)}")
        for path in grids:
            ctx.add_image(sec, path, f"img/{anchor(study.name)}/{path.name}", path.stem,
                          f"Query {_query_number(path)} of {esc(study.title)}: one row per method, the query first, "
                          f"then its top results, each titled with its label distance d to the query. "
                          f"{code(ctx.shown(path))}, written by embedder.retrieval_grid.write_grids "
                          f"({code('python -m embedder.rows')}).", "retrieval grid", "embedder.retrieval_grid")
    return sec


def section_sweep(ctx: Context, studies: list[Study]) -> Section:
    from eval.reporting.figures import plot_sweep, sweep_grid

    sec = Section("5. Embedding dimension (Fig. 5)")
    sweeps = [s for s in studies if s.sweep]
    if not sweeps:
        sec.note_missing(f"no embedding-dimension sweep under {ctx.shown(ctx.run / 'results')} (a study whose "
                         "config sets dims, rows named \"<method> <d>-D\")",
                         f"{STAGE1}, with a config that sets dims: [16, 32, 64, 128]")
    for study in sweeps:
        ks = [k for k in (10, 50) if k <= study.k_max] or [study.k_max]
        if not sweep_grid(study.rows, ks[0])[1]:
            sec.note_missing(f"{study.name}: no rows named \"<method> <d>-D\" in its retrieval.json",
                             "python -m embedder.rows with dims set in the config")
            continue
        rel = f"img/{anchor(study.name)}/dims.png"
        plot_sweep(study.rows, ks, study.baseline(), ctx.target(rel), study.title)
        sec.add(figure(rel, f"dimension sweep {study.name}",
                       f"nDCG@{' and @'.join(map(str, ks))} against the embedding dimension, one line per loss; "
                       f"dashed: the untrained baseline. Drawn by eval.reporting.report from the "
                       f"\"&lt;method&gt; &lt;d&gt;-D\" rows. "
                       + study_source(ctx, study)))
        for k in ks:
            dims, grid = sweep_grid(study.rows, k)
            best = {d: max(c[d] for c in grid.values() if d in c) for d in dims}
            rows = [[m] + [_num(c[d], c[d] == best[d]) if d in c else "-" for d in dims] for m, c in grid.items()]
            sec.add(f"<h3>nDCG@{k} by embedding dimension ({esc(study.title)})</h3>"
                    + table(["method"] + [f"{d}-D" for d in dims], rows))
    return sec


def _pick_pose_study(ctx: Context, studies: list[Study]):
    """The first pose study (by name) whose log-ratio row stored its embeddings, and those rows."""
    for study in [s for s in studies if s.track == "pose" and not s.sweep]:
        lr = next(iter(study.log_ratio_rows()), None)
        if lr is None:
            continue
        path = study.npz(lr, ctx.run)
        emb = load_embeddings(path) if path else None
        if emb is not None:
            base = study.baseline()
            base_path = study.npz(base, ctx.run) if base else None
            return study, [(base, base_path, load_embeddings(base_path) if base_path else None), (lr, path, emb)]
    return None, []


def _tsne_items(ctx: Context, study: Study, lr_emb) -> tuple[np.ndarray, np.ndarray, np.ndarray | None, str]:
    """(items, index of each item's first embedding row, pose labels or None, why no labels).

    Queries and database share items, so each is drawn once; a fixed-seed subsample keeps t-SNE's
    quadratic cost bounded by ``ctx.tsne_points`` and the picture the same from run to run.
    """
    from eval.reporting.figures import label_vectors

    joints, why = pose_labels(study, ctx.run)
    items = np.concatenate([lr_emb["query_items"], lr_emb["db_items"]])
    items, first = np.unique(items, return_index=True)
    if len(items) > ctx.tsne_points:
        keep = np.sort(np.random.default_rng(0).choice(len(items), ctx.tsne_points, replace=False))
        items, first = items[keep], first[keep]
    if joints is not None and items.max() >= len(joints):
        joints, why = None, "the pose labels have fewer items than the embeddings index"
    labels = label_vectors(joints[items]) if joints is not None else None
    return items, first, labels, why


def _tsne_maps(ctx: Context, sec: Section, rows, lr_emb, first: np.ndarray, labels: np.ndarray | None):
    """(titled 2-D maps, their source files, neighbour-ratio HTML) for each row whose embeddings can be
    drawn beside the log-ratio one; a row that cannot (absent, other items, non-finite) becomes a note on
    ``sec`` instead, so one bad file costs its panel and not the section."""
    from eval.reporting.figures import neighbour_ratio, tsne

    maps, sources, ratios = [], [], []
    for name, path, emb in rows:
        if emb is None:
            sec.note_missing(f"embeddings of the baseline row {name!r} ({ctx.shown(path) if path else 'no file'})",
                             f"{STAGE1} for the pose config (a rerun adds them)")
            continue
        if not all(np.array_equal(emb[k], lr_emb[k]) for k in ("query_items", "db_items")):
            sec.note_missing(f"{ctx.shown(path)}: embeds other evaluation items than the log-ratio row",
                             f"{STAGE1} for the pose config")
            continue
        both = np.concatenate([emb["query_emb"], emb["db_emb"]])[first]
        if not np.all(np.isfinite(both)) or len(both) < 5:
            sec.note_missing(f"usable embeddings in {ctx.shown(path)} (non-finite values or < 5 items)",
                             f"{STAGE1} for the pose config")
            continue
        xy = tsne(both)
        ratio = neighbour_ratio(xy, labels) if labels is not None else None
        title = f"{name} ({both.shape[1]}-D)"
        if ratio is not None:
            ratios.append(f"{esc(name)} <b data-ratio=\"{ratio:.3f}\">{ratio:.2f}</b>")
            title += f"\nneighbour label ratio {ratio:.2f}"
        maps.append((title, xy))
        sources.append(code(ctx.shown(path)))
    return maps, sources, ratios


def section_tsne(ctx: Context, studies: list[Study]) -> Section:
    from eval.reporting.figures import first_component, plot_maps

    sec = Section("6. Pose embeddings in 2-D (t-SNE)")
    try:
        import sklearn.manifold  # noqa: F401 - optional: only this section needs it
    except ImportError:
        sec.note_missing("scikit-learn (its TSNE draws this map)", "pip install scikit-learn")
        return sec
    study, rows = _pick_pose_study(ctx, studies)
    if study is None:
        poses = [s.name for s in studies if s.track == "pose" and not s.sweep]
        sec.note_missing(f"embeddings of a trained log-ratio pose row (query_emb/db_emb in its .npz; pose studies "
                         f"found: {', '.join(poses) or 'none'}; files written before embeddings were stored lack them)",
                         f"{STAGE1} for the pose config: a rerun recomputes rows without embeddings and reuses "
                         "the trained models")
        return sec
    lr_emb = rows[1][2]
    items, first, labels, why = _tsne_items(ctx, study, lr_emb)
    colour, loads = first_component(labels) if labels is not None else (None, "")
    maps, sources, ratios = _tsne_maps(ctx, sec, rows, lr_emb, first, labels)
    if not maps:
        return sec
    rel = f"img/{anchor(study.name)}/tsne.png"
    plot_maps(maps, colour, "label PC1", ctx.target(rel))
    colour_text = (f"Colour: each item's score on the first principal component of its pose label (the 16 joint "
                   f"coordinates in the crop frame, 0..1), loading most on {esc(loads)}. Neighbour label ratio: mean "
                   f"label distance (Euclidean, same coordinates) from each point to its 10 nearest map neighbours "
                   f"over that of all pairs ({'; '.join(ratios)}); 1 = no label structure, lower = "
                   f"label neighbours stay together."
                   if labels is not None else f"Uncoloured: {esc(why)}.")
    sec.add(figure(rel, "t-SNE of pose embeddings",
                   f"t-SNE (scikit-learn, seed 0, PCA to 50-D first when wider) of {len(items)} evaluation items "
                   f"(queries and database) of study {esc(study.name)}; left to right: "
                   f"{', '.join(esc(t) for t, _ in maps)} (baseline before metric learning, then the trained log-ratio "
                   f"embedding). {colour_text} Embeddings from {', '.join(sources)} "
                   f"(query_emb/db_emb, written by {code('python -m embedder.rows')}); "
                   "drawn by eval.reporting.report."))
    return sec


# ------------------------------------------------------------------------------------------ the page


def build(ctx: Context) -> list[Section]:

    studies, problems = load_studies(ctx.run)
    captioning = load_captioning(ctx.run)
    sections = [section_table1(ctx, captioning), section_retrieval_tables(ctx, studies), section_curves(ctx, studies),
                section_grids(ctx, studies), section_sweep(ctx, studies), section_tsne(ctx, studies),
                section_examples(ctx, captioning), section_attention(ctx, captioning),
                section_self_retrieval(ctx, captioning)]
    for problem in problems:
        sections[1].note_missing(problem, "rerun embedder.retrieval_report for that study")
    return sections


def write_report(run: Path, out: Path, command: str, examples: int = 6, tsne_points: int = 800) -> list[Section]:
    run = Path(run)
    if not run.is_dir():
        raise CapawareError(run, "no such run folder", "pass the pipeline's run folder (the one holding results/)")
    out = Path(out)
    with atomic_folder(out) as tmp:
        ctx = Context(run, tmp, command, examples, tsne_points)
        sections = build(ctx)
        intro = (f"<p>Run folder {code(run)}. Kim et al., CVPR 2019, <i>Deep Metric Learning Beyond Binary "
                 f"Supervision</i>: log-ratio metric learning on continuous labels, then caption-aware features for "
                 f"captioning. Generated by {code(command)}; every figure says which file and command it comes "
                 f"from. Check it with {code('python -m eval.reporting.check ' + str(out / 'index.html'))}.</p>")
        (tmp / "index.html").write_text(page(f"capaware report: {run.resolve().name}", intro, sections),
                                        encoding="utf-8")
    return sections


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--run", required=True, help="the pipeline's run folder (holding results/)")
    parser.add_argument("--out", default=None, help="report folder (default RUN/report); replaced whole")
    parser.add_argument("--examples", type=int, default=6, help="caption examples to show (default 6)")
    parser.add_argument("--tsne-points", type=int, default=800, help="most items in the t-SNE map")
    a = parser.parse_args(argv)
    out = Path(a.out) if a.out else RunDir(a.run).report
    args = argv if argv is not None else sys.argv[1:]
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "eval.reporting.report", *args])
    sections = write_report(Path(a.run), out, command, max(1, a.examples), max(10, a.tsne_points))
    missing = [m for s in sections for m in s.missing]
    html = (out / "index.html").read_text(encoding="utf-8")
    print(f"report: {len(sections)} sections, {html.count('<img ')} images, {html.count('<table')} tables, "
          f"{len(missing)} missing inputs -> {out / 'index.html'}")
    for line in missing:
        print(f"  missing: {line}")


if __name__ == "__main__":
    run_cli(main)
