"""SCST recipes compared over seeds:
``python -m studies.scst_recipes.scst_recipes JOBS.json --out DIR [--machine TEXT]``.

JOBS.json (written by studies/scst_recipes/run_scst_recipes.py) lists, per recipe, seed and captioner, the XE run and
the SCST run started from it. For every job eval.reporting.scst_gains reads both runs; per recipe this writes,
over seeds (each seed's value is the mean over its captioners, then mean ± sd over seeds):

- val: CIDEr-D gain over the XE start (best epoch minus epoch 0) and bad endings at the best epoch;
- test: CIDEr-D, BLEU-4, distinct captions, bad endings and mean length, each as SCST minus XE;
- counts over all runs: CIDEr-D up, BLEU-4 up, and all four checks of eval.reporting.scst_gains;
- paired differences, seed by seed, of the end-token variants (eos minus noeos of the same baseline
  and objective), the question SacreEOS asks.

The choice is made on val only, with the guards of eval.reporting.scst_gains' test checks that val can give:
among the recipes whose val bad endings stay within 2 points of the XE start's and whose val distinct
captions keep at least 80% of the XE start's, the one that raised val CIDEr-D in the most runs (a recipe
the demo ships must hold on every seed and captioner; where the collapse guard allowed no epoch,
best.pt is the XE start and the gain is 0), ties broken by the larger mean val CIDEr-D gain. Test
numbers are reported beside it, never used.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections import defaultdict
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from studies.seed_stats import stat
from eval.reporting.scst_gains import CHECKS, pair

TEST = {"C": "CIDEr-D", "B4": "BLEU-4", "distinct": "distinct captions", "bad": "bad endings",
        "length": "mean length"}


def load_jobs(path: str | Path) -> list[dict]:
    try:
        jobs = json.loads(Path(path).read_text())["jobs"]
    except (OSError, json.JSONDecodeError, KeyError, TypeError) as err:
        raise CapawareError(path,
                            f"not a jobs file of studies/scst_recipes/run_scst_recipes.py ({err.__class__.__name__})",
                            "run python -m studies.scst_recipes.run_scst_recipes PIPELINE_CONFIG RUN SEED...") from None
    if not jobs:
        raise CapawareError(path, "lists no jobs",
                            "run python -m studies.scst_recipes.run_scst_recipes with some seeds")
    return jobs


def per_job(job: dict) -> dict:
    p = pair(job["xe_run"], job["scst_run"])
    x, s = p["xe"], p["scst"]
    out = {"recipe": job["recipe"], "seed": job["seed"], "run": job["run"], "signature": s["signature"],
           "val_dC": p["val_C"] - p["val_C_xe"], "val_bad": p["val_bad"], "val_bad_xe": p["val_bad_xe"],
           "val_distinct": p["val_distinct"], "val_distinct_xe": p["val_distinct_xe"],
           "checks": p["checks"], "C": s["C"], "C_xe": x["C"],
           "val_dB4": (p["val_B4"] - p["val_B4_xe"]) if p.get("val_B4") is not None and p.get("val_B4_xe") is not None
           else float("nan")}
    for k in TEST:
        out[f"d{k}"] = s[k] - x[k]
    out["length"] = s["length"]
    return out


def seed_means(rows: list[dict], key: str) -> list[float]:
    """Per seed, the mean of ``key`` over that seed's captioners (seeds in ascending order)."""
    by_seed = defaultdict(list)
    for r in rows:
        by_seed[r["seed"]].append(r[key])
    return [float(np.mean(by_seed[s])) for s in sorted(by_seed)]


SUMMARY_KEYS = ("val_dC", "val_bad", "val_bad_xe", "val_distinct", "val_distinct_xe", "C", "dC", "dB4", "ddistinct",
                "dbad", "length")


def summarise(rows: list[dict]) -> dict:
    out = {"n_runs": len(rows), "seeds": sorted({r["seed"] for r in rows}),
           "signature": sorted({str(r["signature"]) for r in rows})}
    for k in SUMMARY_KEYS:
        out[k] = stat(seed_means(rows, k))
    out["C_up"] = sum(r["dC"] > 0 for r in rows)
    out["val_C_up"] = sum(r["val_dC"] > 0 for r in rows)
    out["val_B4_up"] = sum(r["val_dB4"] > 0 for r in rows)  # nan (a history without BLEU-4) counts as not up
    out["B4_up"] = sum(r["dB4"] > 0 for r in rows)
    out["all_checks"] = sum(all(r["checks"].values()) for r in rows)
    return out


def choose(summary: dict[str, dict]) -> tuple[str, str]:
    """The val choice and the sentence that says why."""
    def guarded(s: dict) -> bool:
        return (s["val_bad"]["mean"] <= s["val_bad_xe"]["mean"] + 0.02
                and s["val_distinct"]["mean"] >= 0.8 * s["val_distinct_xe"]["mean"])

    ok = {k: s for k, s in summary.items() if guarded(s)}
    if not ok:
        raise CapawareError("scst recipes", "every recipe raised val bad endings by more than 2 points or lost more "
                            "than 20% of the val distinct captions", "widen the comparison (lr, epochs, XE weight)")
    best = max(ok, key=lambda k: (ok[k]["val_C_up"], ok[k]["val_B4_up"], ok[k]["val_dC"]["mean"]))
    dropped = sorted(set(summary) - set(ok))
    why = (f"`{best}`: val CIDEr-D rose in {ok[best]['val_C_up']} of its {ok[best]['n_runs']} runs, the most, and val "
           f"BLEU-4 in {ok[best]['val_B4_up']} (mean CIDEr-D gain {ok[best]['val_dC']['mean']:+.3f}; "
           f"ties on CIDEr-D go "
           f"to more BLEU-4 rises, then to the larger mean gain), among the recipes whose val bad "
           f"endings stay within 2 points of the XE start's and whose val distinct captions keep 80% of its"
           + (f" (excluded: {', '.join(dropped)})" if dropped else " (none excluded)"))
    return best, why


def eos_pairs(rows_by_recipe: dict[str, list[dict]]) -> list[dict]:
    """eos minus noeos, seed by seed, for each baseline x objective present in both variants."""
    out = []
    for name in sorted(rows_by_recipe):
        if "-eos-" not in name:
            continue
        other = name.replace("-eos-", "-noeos-")
        if other not in rows_by_recipe:
            continue
        d = {"pair": f"{name} − {other}"}
        for k in ("val_dC", "C", "dB4", "dbad", "length"):
            a, b = seed_means(rows_by_recipe[name], k), seed_means(rows_by_recipe[other], k)
            if len(a) == len(b):
                d[k] = stat(np.subtract(a, b))
        out.append(d)
    return out


def _f(stat: dict, digits: int = 3, signed: bool = True, pct: bool = False) -> str:
    scale, unit = (100, " pt") if pct else (1, "")
    text = f"{stat['mean'] * scale:{'+' if signed else ''}.{1 if pct else digits}f}"
    return text + ("" if stat["sd"] is None else f" ± {stat['sd'] * scale:.{1 if pct else digits}f}") + unit


def markdown(summary: dict, pairs: list[dict], best: str, why: str, machine: str, sources: str) -> str:
    n = next(iter(summary.values()))["n_runs"]
    lines = [f"### SCST recipes over seeds ({n} runs per recipe: captioners x seeds; mean ± sd over seeds)", "",
             "| recipe | val ΔC | val bad endings | val distinct (XE) | test C | ΔC | ΔB4 | Δdistinct | "
             "Δbad endings | "
             "length | val C up | val B4 up | C up | B4 up | all 4 checks |",
             "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|"]
    for name, s in summary.items():
        mark = f"**{name}**" if name == best else name
        lines.append(
            f"| {mark} | {_f(s['val_dC'])} | {_f(s['val_bad'], signed=False, pct=True)} | "
            f"{s['val_distinct']['mean']:.2f} ({s['val_distinct_xe']['mean']:.2f}) | {_f(s['C'], signed=False)} | "
            f"{_f(s['dC'])} | {_f(s['dB4'])} | {_f(s['ddistinct'], 2)} | {_f(s['dbad'], pct=True)} | "
            f"{_f(s['length'], 2, signed=False)} | {s['val_C_up']}/{s['n_runs']} | {s['val_B4_up']}/{s['n_runs']} | "
            f"{s['C_up']}/{s['n_runs']} | "
            f"{s['B4_up']}/{s['n_runs']} | "
            f"{s['all_checks']}/{s['n_runs']} |")
    if pairs:  # only when both end-token variants of a recipe ran
        lines += ["", "Paired by seed, end token in the reward minus not (same baseline and objective):", "",
                  "| pair | val ΔC | test C | ΔB4 | Δbad endings | length |", "|---|---:|---:|---:|---:|---:|"]
    for d in pairs:
        lines.append(f"| {d['pair']} | {_f(d['val_dC'])} | {_f(d['C'])} | {_f(d['dB4'])} | "
                     f"{_f(d['dbad'], pct=True)} | {_f(d['length'], 2)} |")
    lines += ["", f"Chosen on val: {why}.", "",
              "Δ: SCST minus its XE start (test split, beam 2, eval.score_captions); "
              "val ΔC: best val epoch minus the "
              "XE start (rl.scst's history); bad endings: captions whose last word ends no training reference; "
              "all 4 checks: " + "; ".join(d for d, _ in CHECKS.values()) + ". Recipes: baseline greedy | mean of "
              "the other samples; eos | noeos: the end token in the CIDEr-D reward or not; xe | plain: with the "
              f"config's XE term or without; -b<w>: w x sentence BLEU-4 added to the reward. "
              f"Machine: {machine}. Jobs: {sources}."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("jobs", help="jobs.json of studies/scst_recipes/run_scst_recipes.py")
    parser.add_argument("--out", required=True, help="folder for scst_recipes.{md,json}")
    parser.add_argument("--machine", default="not given (--machine)")
    a = parser.parse_args(argv)
    rows_by_recipe = defaultdict(list)
    for job in load_jobs(a.jobs):
        rows_by_recipe[job["recipe"]].append(per_job(job))
    summary = {k: summarise(v) for k, v in sorted(rows_by_recipe.items())}
    best, why = choose(summary)
    pairs = eos_pairs(rows_by_recipe)
    text = markdown(summary, pairs, best, why, a.machine, a.jobs)
    out = Path(a.out)
    command = shlex.join(["python", "-m", "studies.scst_recipes.scst_recipes",
                          *(argv if argv is not None else sys.argv[1:])])
    write_text(out / "scst_recipes.md", text)
    write_text(out / "scst_recipes.json", json.dumps({"recipes": summary, "eos_pairs": pairs, "chosen": best,
                                                      "why": why, "runs": rows_by_recipe, "machine": a.machine,
                                                      "command": command}, indent=1))
    print(text + f"-> {out / 'scst_recipes'}.{{md,json}}")


if __name__ == "__main__":
    run_cli(main)
