"""Probe curves over seeds: ``python -m studies.probes.probe_curve_seeds CURVE.json... [--target colour=0.5]``.

Each CURVE.json is one seed's ``probe_curve.json`` (studies/probes/probe_curve.py) of the same recipe. Prints, per row
and step, every group's test accuracy as mean ± sd over the seeds, then the target group's value per seed with how
many seeds reach the target (issue #35's positive control: colour >= .50 on 3 of 3 seeds).
"""
from __future__ import annotations

import argparse
import sys

import numpy as np

from capcore.errors import CapawareError, run_cli
from studies.json_files import read_json_files


def load(paths: list[str]) -> list[dict]:
    return read_json_files(paths, "run python -m studies.probes.probe_curve for that seed first")


def points(curve: dict) -> dict[tuple[str, int], dict[str, float]]:
    return {(r["row"], r["step"]): r["probe"] for r in curve["rows"]}


def table(curves: list[dict], group: str, target: float) -> str:
    """Rows and steps every seed reached, in the first curve's order."""
    per_seed = [points(c) for c in curves]
    keys = [k for k in per_seed[0] if all(k in p for p in per_seed)]
    groups = list(curves[0]["floor"])
    sd = (lambda v: v.std(ddof=1)) if len(curves) > 1 else (lambda v: 0.0)
    lines = [f"| row | step | seeds | {' | '.join(groups)} | {group} per seed | seeds >= {target:.2f} |",
             "|---|---:|---:|" + "---:|" * len(groups) + "---|---:|",
             "| majority (floor) | | | " + " | ".join(f"{curves[0]['floor'][g]:.3f}" for g in groups) + " | | |"]
    for k in keys:
        vals = {g: np.array([p[k][g] for p in per_seed]) for g in groups}
        cells = " | ".join(f"{vals[g].mean():.3f} ± {sd(vals[g]):.3f}" for g in groups)
        each = ", ".join(f"{v:.3f}" for v in vals[group])
        lines.append(f"| {k[0]} | {k[1]} | {len(curves)} | {cells} | {each} | {int((vals[group] >= target).sum())} of "
                     f"{len(curves)} |")
    return "\n".join(lines) + ("\n\nTest accuracy of linear probes on the pooled trunk features "
                               "(studies.probes.probe), mean ± sd "
                               "over seeds. Curves: " + "; ".join(f"`{c['command']}`" for c in curves) + "\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("curves", nargs="+")
    parser.add_argument("--target", default="colour=0.5", help="GROUP=VALUE: the bar each seed is counted against")
    a = parser.parse_args(sys.argv[1:] if argv is None else argv)
    group, _, value = a.target.partition("=")
    curves = load(a.curves)
    if group not in curves[0]["floor"]:
        raise CapawareError("--target", f"no group {group!r} in the curves",
                            f"use one of {', '.join(curves[0]['floor'])}")
    print(table(curves, group, float(value)))


if __name__ == "__main__":
    run_cli(main)
