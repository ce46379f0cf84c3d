"""Table 1 over training seeds: ``python -m studies.table1_seeds.results_seeds TABLE.json... --out DIR``.

Each input is the ``captioning.json`` of eval.reporting.results_table for one captioner training seed (the same
features, other seeds). Written to DIR: ``captioning_seeds.md`` and ``.json`` with

- per cell (Model x Features x Training) the mean ± sd over seeds of B4, C, M, R and the grounding
  columns G, D (sample sd, n - 1; a single seed shows no sd);
- per Model x Features x Training the paired difference against Img (Cap − Img, and Oracle − Img, Attr − Img
  ... where the tables hold those rows) of each metric, seed by seed, then its mean ± sd; for CIDEr-D a
  paired t-test over seeds, its 95% half-width and the smallest difference the seeds could detect
  (``paired_test``). The paper's claim (Cap > Img) holds on this data when the test says so; "no
  difference" is printed with the size of difference the run could have seen.

One seed is an anecdote: the demo's own Table 1 is one of these seeds.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import numpy as np
from scipy.stats import t as student_t

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from eval.reporting import columns
from eval.reporting.results_table import BESIDE, COLUMNS
from studies.seed_stats import stat, text

METRICS = [c for c in [*COLUMNS, *BESIDE] if c != "S"]
KEY = ("model", "features", "training")


def read_table(path: str | Path) -> dict[tuple[str, str, str], dict]:
    path = Path(path)
    try:
        data = json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise CapawareError(path, f"not a readable captioning.json ({err})",
                            "write it with python -m eval.reporting.results_table RUN... --out DIR") from None
    rows = data.get("rows") if isinstance(data, dict) else None
    if not isinstance(rows, list):
        raise CapawareError(path, "no 'rows' list",
                            "write it with python -m eval.reporting.results_table RUN... --out DIR")
    return {tuple(r[k] for k in KEY): r for r in rows}


def paired_test(diffs, image: tuple[float, int] | None = None) -> dict:
    """A paired t-test of per-seed differences against zero, and what the run could have seen.

    ``se``: the standard error of the mean difference. Over seeds alone it is sd / sqrt(n); the test set is
    fixed, so that misses how the difference would move on other test images. ``image`` = (se, images), when
    given, is that part (``image_se``), and ``se`` is then sqrt(seed part^2 + image part^2): slightly
    conservative, as both parts hold a share of the seed-by-image interaction. The degrees of freedom are
    Welch-Satterthwaite's, never more than the seeds' n - 1 (issue #46): so p with the images' error is never
    below p of the seeds alone. ``half_width`` = t(.975) se, the 95% confidence
    half-width; ``p``, two-sided; ``detectable`` = (t(.975) + t(.80)) se, the smallest true mean difference
    found at the 5% level with 80% power. A difference smaller than ``detectable`` going unseen says
    nothing; "no difference" is only as strong as this number is small."""
    d = np.asarray(diffs, dtype=np.float64)
    n = len(d)
    if n < 2:
        return {"n": n, "half_width": None, "p": None, "detectable": None, "se": None, "df": None}
    seed_var = d.var(ddof=1) / n
    image_var, n_images = (image[0] ** 2, image[1]) if image else (0.0, 2)
    se = float(np.sqrt(seed_var + image_var))
    # Welch-Satterthwaite, capped at what the design replicates: adding a source of error must never make the
    # test more confident than the seeds alone (uncapped, the test images raised df from 4 to ~7 and lowered p)
    df = (n - 1) if not image_var else min(n - 1, se ** 4 / (seed_var ** 2 / (n - 1) + image_var ** 2 / (n_images - 1)))
    t95, t80 = student_t.ppf(0.975, df), student_t.ppf(0.80, df)
    p = float(2 * student_t.sf(abs(d.mean()) / se, df)) if se > 0 else (0.0 if d.mean() else 1.0)
    return {"n": n, "half_width": float(t95 * se), "p": p, "detectable": float((t95 + t80) * se), "se": se,
            "df": float(df), "image_se": image[0] if image else None}


def per_image_scores(row: dict) -> dict[int, float] | None:
    """A Table 1 row's per-image CIDEr-D (``per_image_<split>.json`` beside its metrics file); None when missing."""
    if not row.get("metrics_file"):
        return None
    path = Path(str(row["metrics_file"])).with_name(f"per_image_{row.get('split', 'test')}.json")
    try:
        return {int(r["image_id"]): float(r["CIDEr-D"]) for r in json.loads(path.read_text())}
    except (OSError, ValueError, KeyError, TypeError):
        return None


def image_se(other_rows: list[dict], img_rows: list[dict]) -> tuple[float, int] | None:
    """The test-image part of the standard error of a paired CIDEr-D difference, and the number of images: per
    image, the difference averaged over seeds; their sd / sqrt(images). None when a run's
    ``per_image_<split>.json`` is missing."""
    diffs = []
    for a, b in zip(other_rows, img_rows):
        per = [per_image_scores(a), per_image_scores(b)]
        if per[0] is None or per[1] is None or set(per[0]) != set(per[1]):
            return None
        ids = sorted(per[0])
        diffs.append([per[0][i] - per[1][i] for i in ids])
    d = np.mean(diffs, axis=0)
    return (float(d.std(ddof=1) / np.sqrt(len(d))), len(d)) if len(d) > 1 else None


def aggregate(tables: list[dict]) -> dict:
    """Cells present in every seed's table: mean ± sd per metric, and every feature set's paired difference
    against Img (Cap, Cap2, Attr, Oracle... whichever the tables hold), seed by seed, with its t-test."""
    keys = [k for k in tables[0] if all(k in t for t in tables[1:])]
    cells = []
    for key in keys:
        cell = dict(zip(KEY, key))
        for m in METRICS:
            vals = [t[key].get(m) for t in tables]
            if all(isinstance(v, (int, float)) for v in vals):
                cell[m] = stat(vals)
        signatures = sorted({str(t[key].get("signature")) for t in tables if t[key].get("signature")})
        if signatures:  # one per seed is expected; more than one means the seeds ran different recipes
            cell["signature"] = " / ".join(f"`{s}`" for s in signatures)
        cells.append(cell)
    diffs = []
    for model in dict.fromkeys(k[0] for k in keys):
        for feats in dict.fromkeys(k[1] for k in keys if k[1] != columns.BASELINE):
            for training in columns.order(columns.TRAINING):
                img, other = (model, columns.BASELINE, training), (model, feats, training)
                if img not in keys or other not in keys:
                    continue
                d = {"model": model, "features": feats, "training": training}
                for m in METRICS:
                    pairs = [(t[other].get(m), t[img].get(m)) for t in tables]
                    if all(isinstance(c, (int, float)) and isinstance(i, (int, float)) for c, i in pairs):
                        d[m] = stat([c - i for c, i in pairs])
                if "C" in d:
                    d["C_test"] = paired_test(d["C"]["values"], image_se([t[other] for t in tables],
                                                                         [t[img] for t in tables]))
                diffs.append(d)
    return {"n_seeds": len(tables), "cells": cells, "paired": diffs}


def verdict(d: dict) -> str:
    """X > Img, X < Img (paired t-test on CIDEr-D at the 5% level) or no detectable difference."""
    c = d.get("C")
    if not c:
        return "no CIDEr-D"
    feats = d.get("features", "Cap")
    wins = sum(v > 0 for v in c["values"])
    n = len(c["values"])
    test = d.get("C_test") or paired_test(c["values"])
    count = f"CIDEr-D higher with {feats} on {wins} of {n} seeds"
    if test["p"] is None:
        return f"one seed orders nothing ({count})"
    if test["p"] < 0.05:
        word = f"{feats} > Img" if c["mean"] > 0 else f"{feats} < Img"
        return f"{word} (p = {test['p']:.3f}; {count})"
    return f"no difference detectable at ± {test['detectable']:.3f} (p = {test['p']:.2f}; {count})"


def markdown(result: dict, sources: list[str], machine: str) -> str:
    n = result["n_seeds"]
    lines = [f"### Table 1 over {n} captioner training seeds (mean ± sd)", "",
             "| Model | Features | Training | " + " | ".join(METRICS) + " | SCST signature |",
             "|---|---|---|" + "---:|" * len(METRICS) + "---|"]
    for c in result["cells"]:
        lines.append(f"| {c['model']} | {c['features']} | {c['training']} | "
                     + " | ".join(text(c.get(m), 2 if m in BESIDE else 3) for m in METRICS)
                     + f" | {c.get('signature') or '—'} |")
    lines += ["", "Paired difference against Img, seed by seed (mean ± sd). ΔC ±95%: the confidence half-width of "
                  "ΔC, over seeds and, where the runs' per-image scores are found, over test images too; detectable: "
                  "the smallest true ΔC this run finds at the 5% level with 80% power (paired_test):", "",
              "| Model | Features − Img | Training | " + " | ".join(f"Δ{m}" for m in METRICS)
              + " | ΔC ±95% | detectable | Verdict |",
              "|---|---|---|" + "---:|" * (len(METRICS) + 2) + "---|"]
    for d in result["paired"]:
        test = d.get("C_test") or {}
        hw, det = test.get("half_width"), test.get("detectable")
        lines.append(f"| {d['model']} | {d['features']} − Img | {d['training']} | "
                     + " | ".join(text(d.get(m), 2 if m in BESIDE else 3, signed=True) for m in METRICS)
                     + f" | {'n/a' if hw is None else f'{hw:.3f}'} | {'n/a' if det is None else f'{det:.3f}'}"
                     + f" | {verdict(d)} |")
    lines += ["", f"{columns.legend(scores=tuple(c for c in columns.SCORES if c.key in METRICS))} Test split, "
                  f"beam 2 (G, D: greedy). Seeds: {', '.join(sources)}. "
                  f"Machine: {machine}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("tables", nargs="+", help="captioning.json of eval.reporting.results_table, one per seed")
    parser.add_argument("--out", required=True, help="folder for captioning_seeds.{md,json}")
    parser.add_argument("--machine", default="", help="where it ran (printed under the table)")
    a = parser.parse_args(argv)
    tables = [read_table(p) for p in a.tables]
    result = aggregate(tables)
    if not result["cells"]:
        raise CapawareError(a.tables[0], "no Model/Features/Training cell is in every table",
                            "pass the captioning.json of runs with the same captioners")
    machine = a.machine or "not given (--machine)"
    text = markdown(result, [str(Path(p)) for p in a.tables], machine)
    out = Path(a.out)
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "studies.table1_seeds.results_seeds",
                                                *(argv if argv is not None else sys.argv[1:])])
    write_text(out / "captioning_seeds.md", text)
    write_text(out / "captioning_seeds.json", json.dumps({**result, "sources": a.tables, "machine": machine,
                                                          "command": command}, indent=1))
    print(text + f"-> {out / 'captioning_seeds'}.{{md,json}}")


if __name__ == "__main__":
    run_cli(main)
