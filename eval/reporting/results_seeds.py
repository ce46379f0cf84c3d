"""Table 1 over training seeds: ``python -m eval.reporting.results_seeds TABLE.json... --out DIR``.

Each input is the ``captioning.json`` of eval.reporting.results_table for one captioner training seed (the same
features, other seeds). Written to DIR: ``captioning_seeds.md`` and ``.json`` with

- per cell (Model x Features x Training) the mean ± sd over seeds of B4, C, M, R and the grounding
  columns G, D (sample sd, n - 1; a single seed shows no sd);
- per Model x Training the paired Cap − Img difference of each metric, seed by seed, then its mean ± sd:
  the paper's claim (Cap > Img) holds on this data when the mean difference of C is above zero by more
  than its spread, and the verdict line says which way each pair falls.

One seed is an anecdote: the demo's own Table 1 is one of these seeds.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path


from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from eval.reporting.results_table import BESIDE, COLUMNS
from eval.reporting.seed_stats import agreement, stat, text

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
        raise CapawareError(path, "no 'rows' list", "write it with python -m eval.reporting.results_table RUN... --out DIR")
    return {tuple(r[k] for k in KEY): r for r in rows}


def aggregate(tables: list[dict]) -> dict:
    """Cells present in every seed's table: mean ± sd per metric, and the paired Cap − Img differences."""
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
        for training in ("XE", "RL"):
            img, cap = (model, "Img", training), (model, "Cap", training)
            if img not in keys or cap not in keys:
                continue
            d = {"model": model, "training": training}
            for m in METRICS:
                pairs = [(t[cap].get(m), t[img].get(m)) for t in tables]
                if all(isinstance(c, (int, float)) and isinstance(i, (int, float)) for c, i in pairs):
                    vals = [c - i for c, i in pairs]
                    d[m] = stat(vals)
            diffs.append(d)
    return {"n_seeds": len(tables), "cells": cells, "cap_minus_img": diffs}


def verdict(d: dict) -> str:
    c = d.get("C")
    if not c:
        return "no CIDEr-D"
    wins = sum(v > 0 for v in c["values"])
    n, sign = len(c["values"]), agreement(c["values"])
    if sign > 0 and c["mean"] - c["sd"] > 0:
        word = "Cap > Img"
    elif sign < 0 and c["mean"] + c["sd"] < 0:
        word = "Cap < Img"
    else:
        word = "no clear difference"
    return f"{word} (CIDEr-D higher with Cap on {wins} of {n} seeds)"


def markdown(result: dict, sources: list[str], machine: str) -> str:
    n = result["n_seeds"]
    lines = [f"### Table 1 over {n} captioner training seeds (mean ± sd)", "",
             "| Model | Features | Training | " + " | ".join(METRICS) + " | SCST signature |",
             "|---|---|---|" + "---:|" * len(METRICS) + "---|"]
    for c in result["cells"]:
        lines.append(f"| {c['model']} | {c['features']} | {c['training']} | "
                     + " | ".join(text(c.get(m), 2 if m in BESIDE else 3) for m in METRICS)
                     + f" | {c.get('signature') or '—'} |")
    lines += ["", "Paired difference Cap − Img, seed by seed (mean ± sd):", "",
              "| Model | Training | " + " | ".join(f"Δ{m}" for m in METRICS) + " | Verdict |",
              "|---|---|" + "---:|" * len(METRICS) + "---|"]
    for d in result["cap_minus_img"]:
        lines.append(f"| {d['model']} | {d['training']} | "
                     + " | ".join(text(d.get(m), 2 if m in BESIDE else 3, signed=True) for m in METRICS)
                     + f" | {verdict(d)} |")
    lines += ["", f"B4 BLEU-4, C CIDEr-D, M METEOR, R ROUGE-L (test split, beam 2); G CIDEr-D real / shuffled "
                  f"features, D distinct captions / images (greedy), E bad endings (captions whose last word ends no "
                  f"training reference); SCST signature: rl/signature.py. Seeds: {', '.join(sources)}. "
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
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "eval.reporting.results_seeds",
                                                *(argv if argv is not None else sys.argv[1:])])
    write_text(out / "captioning_seeds.md", text)
    write_text(out / "captioning_seeds.json", json.dumps({**result, "sources": a.tables, "machine": machine,
                                                          "command": command}, indent=1))
    print(text + f"-> {out / 'captioning_seeds'}.{{md,json}}")


if __name__ == "__main__":
    run_cli(main)
