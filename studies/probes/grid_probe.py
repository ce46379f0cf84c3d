"""Grid probes: what the attention grid a captioner reads says about each cell and about the scene.

``python -m studies.probes.grid_probe --karpathy DATA/dataset_coco.json --features NAME=FEATS.h5 [...] [--paired A=B]
--out DIR``

Why: ``studies.probes.probe`` reads the pooled ``fc`` vector, but the captioners attend over ``att``, the G x G grid. A
count or a place can be lost in the mean and still be in the grid, and the other way round. Two probes here:

- **cell probe**: one linear map, shared by every cell, from a cell's feature vector to what lies in that cell
  (the objects whose centre falls in it): which colours, shapes and sizes (exact set, scored on the cells that
  hold an object) and how many objects (0, 1, 2+; arg-max, scored on every cell). It asks: can a captioner that
  attends to one cell read what is there?
- **flat probe**: the whole grid, flattened, to the image-level groups of ``studies.probes.probe`` (shape, colour,
  count, size, position in 3 x 3 regions, background). It asks what the grid holds about the scene, places included.

Both are ridge least squares on features standardised by the train split, an unpenalised intercept, each
group's penalty chosen on val from ``ALPHAS`` and scored on test; indicator targets are read as present above 0.5,
one-value groups by arg-max. Least squares rather than ``studies.probes.probe``'s L-BFGS logistic fit: one SVD gives
every penalty in closed form, and the flattened grid (G^2 C inputs, more than there are images) needs the
dual form, which the SVD gives for free.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from capdata.captions import in_split, read_captions
from embedder.pretrain import group_accuracy, multi_hot
from studies.probes.probe import GROUPS, check_paired, probed_tags, parse_features, scale_by_train, signed, targets
from studies.seed_stats import stat, text
from feature_extract.h5io import open_features
from feature_extract.oracle import cell_of

ALPHAS = (1e-4, 1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0)
"""Ridge penalties tried on val, times the mean squared singular value of the train features (scale-free)."""
CELL_GROUPS = ("colour", "shape", "size", "count")
COUNT_CLASSES = ("0", "1", "2+")


class Ridge:
    """Ridge regression for many penalties from one thin SVD of the centred inputs: W(lam) = V diag(s / (s^2 +
    lam)) U^T Y, valid whether there are more inputs than rows or fewer. The intercept is the targets' mean
    (unpenalised: the inputs are centred)."""

    def __init__(self, x: np.ndarray, y: np.ndarray):
        self.x_mean, self.y_mean = x.mean(0), y.mean(0)
        u, self.s, vt = np.linalg.svd(x - self.x_mean, full_matrices=False)
        self.v, self.uty = vt.T, u.T @ (y - self.y_mean)
        self.scale = float(np.mean(self.s ** 2))

    def weights(self, lam: float) -> np.ndarray:
        return self.v @ ((self.s / (self.s ** 2 + lam))[:, None] * self.uty)

    def predict(self, x: np.ndarray, lam: float) -> np.ndarray:
        return (x - self.x_mean) @ self.weights(lam) + self.y_mean


def fit_and_score(xs: dict[str, np.ndarray], ys: dict[str, np.ndarray], names: list[str],
                  keep: dict[str, np.ndarray] | None = None) -> dict:
    """Fit on train (one SVD for every group and penalty); per group, keep the penalty best on val and report
    it on test, as studies.probes.probe fits each group on its own. ``keep`` masks the rows each split is scored on (the
    cell probe scores colour/shape/size on occupied cells)."""
    ridge = Ridge(xs["train"], ys["train"])
    lams = [a * ridge.scale for a in ALPHAS]

    def score(split: str, lam: float) -> dict[str, float]:
        z = ridge.predict(xs[split], lam) - 0.5  # present above 0.5 (group_accuracy reads z > 0)
        return scored(z, ys[split], names, None if keep is None else keep[split])

    val = [score("val", lam) for lam in lams]
    test = [score("test", lam) for lam in lams]
    best = {g: max(range(len(lams)), key=lambda i: (val[i][g], i)) for g in val[0]}  # ties: the stronger penalty
    return {"alpha": {g: ALPHAS[i] for g, i in best.items()}, "test": {g: test[i][g] for g, i in best.items()}}


def scored(z: np.ndarray, y: np.ndarray, names: list[str], keep: np.ndarray | None) -> dict[str, float]:
    """group_accuracy per group; groups other than count only on the ``keep`` rows when given."""
    out = {}
    for group in dict.fromkeys(n.split(":", 1)[0] for n in names):
        cols = [i for i, n in enumerate(names) if n.split(":", 1)[0] == group]
        rows = slice(None) if keep is None or group == "count" else keep
        out[group] = group_accuracy(z[rows][:, cols], y[rows][:, cols], [names[i] for i in cols])[group]
    return out


def cell_tags(records, g: int) -> list[list[list[str]]]:
    """Per image, per cell (row-major, as ``att``), the ``group:value`` tags of the objects centred in it."""
    out = []
    for objs, (w, h) in zip(records.objects, records.sizes):
        cells: list[list[str]] = [[] for _ in range(g * g)]
        for o in objs:
            x, y, bw, bh = o["bbox"]
            cells[cell_of(x + bw / 2, y + bh / 2, w, h, g)] += [f"colour:{o['colour']}", f"shape:{o['shape']}",
                                                                 f"size:{o['size']}"]
        for tags in cells:
            n = len(tags) // 3
            tags.append(f"count:{COUNT_CLASSES[min(n, 2)]}")
        out.append([sorted(set(t)) for t in cells])
    return out


def load_att(path: str, ids: np.ndarray) -> np.ndarray:
    """att [N, G*G, C] of ``ids`` in their order (float64); every image must be in the file."""
    with open_features(path) as f:
        missing = [int(i) for i in ids if int(i) not in f.row]
        if missing:
            raise CapawareError(path, f"{len(missing)} images of the caption set are not in it (e.g. id {missing[0]})",
                                "dump features for every split (images.splits: [])")
        att = f.att[()]
        return att[[f.row[int(i)] for i in ids]].astype(np.float64)


def probe_file(att: np.ndarray, split: dict[str, np.ndarray], records, img_targets: dict) -> dict:
    """The cell probe and the flat probe of one features file."""
    n, hw, c = att.shape
    g = int(round(np.sqrt(hw)))
    if g * g != hw:
        raise CapawareError("att", f"{hw} regions is not a square grid", "probe a features file with a G x G grid")
    tags = cell_tags(records, g)
    names = sorted({t for img in tags for cell in img for t in cell} | {f"count:{k}" for k in COUNT_CLASSES})
    y = multi_hot([cell for img in tags for cell in img], names).reshape(n, hw, -1)
    occupied = y[..., names.index("count:0")] < 0.5
    xs = scale_by_train({s: att[m].reshape(-1, c) for s, m in split.items()})
    cells = fit_and_score(xs, {s: y[m].reshape(-1, len(names)) for s, m in split.items()}, names,
                          keep={s: occupied[m].reshape(-1) for s, m in split.items()})
    flat_x = scale_by_train({s: att[m].reshape(int(m.sum()), -1) for s, m in split.items()})
    flat_names = [n for _, gnames in img_targets.values() for n in gnames]
    flat_y = np.concatenate([yg for yg, _ in img_targets.values()], axis=1)
    flat = fit_and_score(flat_x, {s: flat_y[m] for s, m in split.items()}, flat_names)
    return {"grid": g, "cell": cells["test"], "cell_alpha": cells["alpha"], "flat": flat["test"],
            "flat_alpha": flat["alpha"]}


def run(karpathy: str, features: list[tuple[str, str]], paired: list[tuple[str, str]] = (),
        fmt: str | None = None) -> dict:
    check_paired(features, paired)
    records = read_captions(karpathy, fmt)
    img_tags = probed_tags(records)  # refuses a caption set without scene objects
    split = {s: np.isin(np.arange(len(records)), in_split(records, s)) for s in ("train", "val", "test")}
    img_targets = {g: targets(img_tags, g) for g in GROUPS}
    rows: dict[str, list[dict]] = {}
    for name, path in features:
        result = probe_file(load_att(path, records.image_ids), split, records, img_targets)
        rows.setdefault(name, []).append({"file": path, **result})
        print(f"{name} <- {path}: cell " + ", ".join(f"{g} {v:.3f}" for g, v in result["cell"].items())
              + "; flat " + ", ".join(f"{g} {v:.3f}" for g, v in result["flat"].items()), flush=True)
    return {"karpathy": karpathy, "alphas": list(ALPHAS), "paired": [list(p) for p in paired],
            "n": {s: int(m.sum()) for s, m in split.items()}, "rows": rows}


def markdown(result: dict) -> str:
    lines = []
    for part, groups, what in (("cell", CELL_GROUPS, "Cell probe (what lies in each cell)"),
                               ("flat", GROUPS, "Flat probe (the whole grid -> the scene)")):
        lines += [f"{what}:", "", "| features | seeds | " + " | ".join(groups) + " |",
                  "|---|---|" + "---|" * len(groups)]
        for name, runs in result["rows"].items():
            lines.append(f"| {name} | {len(runs)} | "
                         + " | ".join(text(stat([r[part][g] for r in runs])) for g in groups) + " |")
        for a, b in result["paired"]:
            diffs = {g: [ra[part][g] - rb[part][g] for ra, rb in zip(result["rows"][a], result["rows"][b])]
                     for g in groups}
            lines.append(f"| {a} − {b} (paired) | {len(diffs[groups[0]])} | "
                         + " | ".join(signed(d) for d in diffs.values()) + " |")
            lines.append(f"| {a} − {b}, smallest seed | {len(diffs[groups[0]])} | "  # bars read "on every seed"
                         + " | ".join(f"{min(d):+.3f}" for d in diffs.values()) + " |")
        lines.append("")
    n = result["n"]
    lines.append(f"Test accuracy of ridge least-squares probes on the attention grid (``att``), mean ± sd over the "
                 f"files given per row; fitted on {n['train']} train + restval images, penalty chosen on {n['val']} "
                 f"val images, scored on {n['test']} test images. Cell probe: one map shared by every cell; colour, "
                 f"shape and size are exact sets on the cells holding an object, count (0, 1, 2+) is arg-max on every "
                 f"cell. Flat probe: the flattened grid to studies.probes.probe's groups (exact sets; arg-max for "
                 f"count and background).")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--karpathy", required=True, help="the synthetic caption set's dataset_coco.json")
    parser.add_argument("--format", default=None, help="the caption file's format [found from the file]")
    parser.add_argument("--features", nargs="+", required=True, help="NAME=FEATS.h5; repeat a NAME for its seeds")
    parser.add_argument("--paired", nargs="*", default=[], help="A=B: also report A - B, paired by seed")
    parser.add_argument("--out", required=True, help="folder for grid_probe.md and grid_probe.json")
    a = parser.parse_args(argv)
    result = run(a.karpathy, parse_features(a.features), parse_features(a.paired, "--paired"), a.format)
    out = Path(a.out)
    write_text(out / "grid_probe.json", json.dumps(result, indent=1))
    write_text(out / "grid_probe.md", markdown(result))
    print(markdown(result), end="")
    print(f"-> {out / 'grid_probe.md'}")


if __name__ == "__main__":
    run_cli(main)
