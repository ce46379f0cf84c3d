"""Linear probes: what frozen pooled features carry about each attribute group the captions talk about.

``python -m studies.probes.probe --karpathy DATA/dataset_coco.json --features NAME=FEATS.h5 [NAME=FEATS.h5 ...]
--out DIR``

Why: the Img <-> Cap swap of Table 1 measures what caption-aware training adds through two captioners,
their seeds and SCST. A probe asks the features directly. For every attribute group of the synthetic
caption set (shape, colour, count, size, position, background) a linear classifier is fitted on the
stage-two ``fc`` features (the layer4 mean) of the train + restval images, its L2 strength is chosen
on val, and its accuracy is reported on test: the exact set for groups an image can hold several
values of (which shapes, which colours, which sizes, which of the 3 x 3 regions hold an object's
centre), the arg-max for one-value groups (the object count, the background). A NAME given several
times (one file per training seed) is reported as mean ± sd over its files; ``--paired A=B`` adds A - B per
group, seed by seed, with the seeds on which A is ahead. The ``majority`` row
always answers the commonest training value (or set): the floor a probe must clear.

The probe is written here, not taken from scikit-learn (not a capaware dependency): it is 30 lines of
full-batch L-BFGS on a convex loss, and it shares ``group_accuracy`` with class pretraining's report.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from pathlib import Path

import numpy as np
import torch

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from capdata.captions import in_split, read_captions
from embedder.pretrain import EXCLUSIVE_GROUPS, group_accuracy, multi_hot
from studies.seed_stats import mean_sd, stat, text
from feature_extract.h5io import open_features

GROUPS = ("shape", "colour", "count", "size", "position", "background")
L2_GRID = (1e-5, 1e-4, 1e-3, 1e-2, 1e-1)
"""Penalties tried on val (times the mean squared weight); the largest of the best is kept (simplest probe)."""
ROWS, COLS = ("top", "middle", "bottom"), ("left", "centre", "right")


def region(x: float, y: float, width: float, height: float) -> str:
    """The 3 x 3 cell of the image a point lies in, as the captions' position words divide it."""
    return f"{ROWS[min(2, int(3 * y / height))]} {COLS[min(2, int(3 * x / width))]}"


def probed_tags(records) -> list[list[str]]:
    """Per image its ``group:value`` tags for every probed group (needs the synthetic set's attributes)."""
    if records.attributes is None or records.objects is None or records.sizes is None:
        raise CapawareError("--karpathy", "the caption set has no per-image 'attributes', 'objects' and size",
                            "probe the synthetic shapes-captions set (runs/demo/data/captions/dataset_coco.json)")
    out = []
    for attrs, objs, (w, h) in zip(records.attributes, records.objects, records.sizes):
        tags = [f"{g}:{v}" for g in ("shape", "colour", "count", "size", "background") for v in attrs[g]]
        tags += sorted({f"position:{region(o['bbox'][0] + o['bbox'][2] / 2, o['bbox'][1] + o['bbox'][3] / 2, w, h)}"
                        for o in objs})
        out.append(tags)
    return out


def targets(tags: list[list[str]], group: str) -> tuple[np.ndarray, list[str]]:
    """[N, V] 0/1 targets of one group over its values (sorted ``group:value`` names)."""
    names = sorted({t for ts in tags for t in ts if t.split(":", 1)[0] == group})
    return multi_hot(tags, names), names


def fit_linear(x: torch.Tensor, y: torch.Tensor, exclusive: bool, l2: float) -> torch.nn.Linear:
    """A linear classifier fitted to convergence by full-batch L-BFGS: softmax cross-entropy for a one-value
    group, per-value BCE otherwise, plus ``l2`` times the mean squared weight."""
    torch.manual_seed(0)  # the loss is convex: the start only changes the path
    probe = torch.nn.Linear(x.shape[1], y.shape[1], dtype=torch.float64)
    opt = torch.optim.LBFGS(probe.parameters(), lr=1.0, max_iter=300, line_search_fn="strong_wolfe")
    target = y.argmax(1) if exclusive else y

    def closure():
        opt.zero_grad()
        z = probe(x)
        loss = (torch.nn.functional.cross_entropy(z, target) if exclusive
                else torch.nn.functional.binary_cross_entropy_with_logits(z, target))
        loss = loss + l2 * probe.weight.pow(2).sum() / y.shape[1]
        loss.backward()
        return loss

    opt.step(closure)
    return probe


def scale_by_train(x: dict[str, np.ndarray]) -> dict[str, np.ndarray]:
    """Every split scaled by the train split's mean and sd, so one penalty grid fits every backbone."""
    mu, sd = x["train"].mean(0), x["train"].std(0) + 1e-6
    return {s: (v - mu) / sd for s, v in x.items()}


def standardise(x: dict[str, np.ndarray]) -> dict[str, torch.Tensor]:
    """:func:`scale_by_train`, as the float64 tensors the probes fit."""
    return {s: torch.from_numpy(v).double() for s, v in scale_by_train(x).items()}


def probe_group(xs: dict[str, torch.Tensor], y: dict[str, np.ndarray], names: list[str]) -> dict:
    """Fit on ``train`` (standardised features) for every L2 strength, keep the best on ``val``,
    score it on ``test``."""
    exclusive = names[0].split(":", 1)[0] in EXCLUSIVE_GROUPS
    ys = {s: torch.from_numpy(v).double() for s, v in y.items()}

    def score(probe, split):
        with torch.no_grad():
            return group_accuracy(probe(xs[split]).numpy(), y[split], names)["all"]

    fits = [(l2, fit_linear(xs["train"], ys["train"], exclusive, l2)) for l2 in L2_GRID]
    val = [score(p, "val") for _, p in fits]
    best = max(range(len(fits)), key=lambda i: (val[i], i))  # ties: the stronger penalty
    return {"l2": fits[best][0], "val": val[best], "test": score(fits[best][1], "test")}


def majority(y: dict[str, np.ndarray]) -> float:
    """Test accuracy of always answering the commonest training value set of the group."""
    common = Counter(map(tuple, y["train"].astype(int))).most_common(1)[0][0]
    return float((y["test"].astype(int) == np.array(common)).all(1).mean())


def load_fc(path: str, ids: np.ndarray) -> np.ndarray:
    """The pooled features of ``ids``, in their order; every image must be in the file."""
    with open_features(path) as f:
        missing = [int(i) for i in ids if int(i) not in f.row]
        if missing:
            raise CapawareError(path, f"{len(missing)} images of the caption set are not in it (e.g. id {missing[0]})",
                                "dump features for every split (images.splits: [])")
        fc = f.fc[()].astype(np.float64)
        return fc[[f.row[int(i)] for i in ids]]


def check_paired(features: list[tuple[str, str]], paired) -> None:
    """Each ``--paired A=B`` needs as many files for A as for B (one per seed): one line otherwise."""
    files = Counter(name for name, _ in features)
    for a, b in paired:
        if not files[a] or files[a] != files[b]:
            raise CapawareError("--paired", f"{a}={b}: both names need the same number of files (one per seed)",
                                "give each NAME once per seed, in the same seed order")


def run_probes(karpathy: str, features: list[tuple[str, str]], paired: list[tuple[str, str]] = (),
               fmt: str | None = None) -> dict:
    check_paired(features, paired)
    records = read_captions(karpathy, fmt)
    tags = probed_tags(records)
    split = {s: np.isin(np.arange(len(records)), in_split(records, s)) for s in ("train", "val", "test")}
    groups = {g: targets(tags, g) for g in GROUPS}
    ys = {g: {s: y[m] for s, m in split.items()} for g, (y, _) in groups.items()}
    rows: dict[str, list[dict]] = {}
    for name, path in features:
        fc = load_fc(path, records.image_ids)
        xs = standardise({s: fc[m] for s, m in split.items()})
        fit = {g: probe_group(xs, ys[g], groups[g][1]) for g in GROUPS}
        rows.setdefault(name, []).append({"file": path, "groups": fit})
        print(f"{name} <- {path}: " + ", ".join(f"{g} {r['test']:.3f}" for g, r in fit.items()), flush=True)
    return {"karpathy": karpathy, "l2_grid": list(L2_GRID), "groups": list(GROUPS), "paired": [list(p) for p in paired],
            "n": {s: int(m.sum()) for s, m in split.items()},
            "majority": {g: majority(ys[g]) for g in GROUPS}, "rows": rows}


def signed(diffs: list[float]) -> str:
    """A paired difference: mean ± sd and the seeds on which it is positive."""
    m, s = mean_sd(diffs)
    spread = "" if s is None else f" ± {s:.3f}"
    return f"{m:+.3f}{spread} ({sum(d > 0 for d in diffs)}/{len(diffs)})"


def markdown(result: dict) -> str:
    groups = result["groups"]
    lines = ["| features | seeds | " + " | ".join(groups) + " |", "|---|---|" + "---|" * len(groups)]
    lines.append("| majority (floor) | | " + " | ".join(f"{result['majority'][g]:.3f}" for g in groups) + " |")
    for name, runs in result["rows"].items():
        lines.append(f"| {name} | {len(runs)} | "
                     + " | ".join(text(stat([r["groups"][g]["test"] for r in runs])) for g in groups) + " |")
    for a, b in result.get("paired", []):
        runs_a, runs_b = result["rows"][a], result["rows"][b]
        diffs = {g: [ra["groups"][g]["test"] - rb["groups"][g]["test"] for ra, rb in zip(runs_a, runs_b)]
                 for g in groups}
        lines.append(f"| {a} − {b} (paired) | {len(diffs[groups[0]])} | " + " | ".join(
            signed(d) for d in diffs.values()) + " |")
    n = result["n"]
    lines.append("")
    lines.append(f"Test accuracy of a linear probe on the pooled (layer4 mean) features, mean ± sd over the files "
                 f"given per row; fitted on {n['train']} train + restval images, L2 chosen on {n['val']} val images, "
                 f"scored on {n['test']} test images. Exact set for shape, colour, size and position (3 x 3 regions "
                 f"of object centres); arg-max for count and background.")
    return "\n".join(lines) + "\n"


def parse_features(items: list[str], flag: str = "--features") -> list[tuple[str, str]]:
    """``NAME=FILE`` (or, for ``--paired``, ``A=B``) pairs."""
    out = []
    for item in items:
        name, sep, path = item.partition("=")
        if not sep or not name or not path:
            raise CapawareError(flag, f"{item!r} is not NAME=FILE", "e.g. --features Img=runs/demo/features/img.h5")
        out.append((name, path))
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--karpathy", required=True,
                        help="the caption set's dataset_coco.json (its attributes are the targets)")
    parser.add_argument("--format", default=None, help="the caption file's format [found from the file]")
    parser.add_argument("--features", nargs="+", required=True, help="NAME=FEATS.h5; repeat a NAME for its seeds")
    parser.add_argument("--paired", nargs="*", default=[], help="A=B: also report A - B per group, paired by seed "
                        "(the files' order), e.g. Cap-from-identity=Img-identity")
    parser.add_argument("--out", required=True, help="folder for probe.md and probe.json")
    args = parser.parse_args(argv)
    result = run_probes(args.karpathy, parse_features(args.features), parse_features(args.paired, "--paired"),
                        args.format)
    out = Path(args.out)
    write_text(out / "probe.json", json.dumps(result, indent=1))
    write_text(out / "probe.md", markdown(result))
    print(markdown(result), end="")
    print(f"-> {out / 'probe.md'}")


if __name__ == "__main__":
    run_cli(main)
