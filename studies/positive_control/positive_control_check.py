"""The positive control and its negative, decided by the rules docs/declaration.md fixed before the run (issue #46):
``python -m studies.positive_control.positive_control_check recipe NAME=CURVE.json ...`` prints the recipe kept, and
``python -m studies.positive_control.positive_control_check verdict --real CURVE.json... --shuffled CURVE.json...
--out DIR``
writes DIR/positive_control.{md,json}. studies/positive_control/study_positive.sh runs both.

Each CURVE.json is one run's ``probe_curve.json`` (studies/probes/probe_curve.py): per probed step, the colour probe's
test accuracy (``probe``) and the val accuracy of the L2 strength val chose (``probe_val``). The rules:

- recipe: the one whose seed-0 real-label run reaches the highest val colour at any probed step (ties: the first
  named, the #35 recipe);
- budget: the earliest probed step at which every real-label seed's val colour is >= the declared floor; if none
  is, the step with the highest mean val colour (earliest on ties), and the floor counts as not reached on val;
- verdict, on test at that budget: real colour >= the floor on every seed, and the shuffled-label run at least the
  declared margin below the real one on each seed (same seeds, in the same order). Only both together count.

The floor, margin and seeds are the declaration's (studies/trunks/configs/declaration_table1.yaml, positive_control).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from studies.json_files import read_json_files
from studies.declaration import load_declaration
from studies.provenance import with_commit

GROUP = "colour"


def trained(curve: dict, key: str) -> dict[int, float]:
    """step -> the colour probe (``probe`` test, ``probe_val`` val) of the curve's trained row (not 'start')."""
    return {r["step"]: r[key][GROUP] for r in curve["rows"] if r["row"] != "start"}


def choose_recipe(curves: dict[str, dict]) -> str:
    best = {name: max(trained(c, "probe_val").values()) for name, c in curves.items()}
    return max(best, key=lambda name: (best[name], -list(best).index(name)))


def common_steps(curves: list[dict]) -> list[int]:
    steps = sorted(set.intersection(*(set(trained(c, "probe")) for c in curves)))
    if not steps:
        raise CapawareError("curves", "no probed step is shared by every run", "rerun the unfinished runs")
    return steps


def choose_budget(real: list[dict], floor: float) -> tuple[int, bool]:
    """(step, whether every seed's val colour reaches the floor there)."""
    steps = common_steps(real)
    val = np.array([[trained(c, "probe_val")[s] for s in steps] for c in real])  # [seeds, steps]
    reached = [i for i in range(len(steps)) if (val[:, i] >= floor).all()]
    if reached:
        return steps[reached[0]], True
    return steps[int(np.argmax(val.mean(axis=0)))], False


def verdict(real: list[dict], shuffled: list[dict], floor: float, margin: float) -> dict:
    if len(real) != len(shuffled):
        raise CapawareError("--shuffled", f"{len(shuffled)} shuffled runs for {len(real)} real ones",
                            "give one shuffled run per real seed, in the same order")
    step, reached_on_val = choose_budget(real, floor)
    if any(step not in trained(c, "probe") for c in shuffled):
        raise CapawareError("--shuffled", f"a shuffled run has no probe at the budget, step {step}",
                            "finish that run (studies/positive_control/study_positive.sh resumes)")
    r = [trained(c, "probe")[step] for c in real]
    s = [trained(c, "probe")[step] for c in shuffled]
    real_ok = all(v >= floor for v in r)
    negative_ok = all(a - b >= margin for a, b in zip(r, s))
    return {"budget": step, "floor_reached_on_val": reached_on_val, "floor": floor, "margin": margin,
            "real": r, "shuffled": s, "real_holds": real_ok, "negative_holds": negative_ok,
            "counts": real_ok and negative_ok, "commands": [c["command"] for c in real + shuffled]}


def markdown(v: dict) -> str:
    rows = "\n".join(f"| {i} | {a:.3f} | {b:.3f} | {a - b:+.3f} |" for i, (a, b) in
                     enumerate(zip(v["real"], v["shuffled"])))
    budget = (f"the earliest step at which every seed's val colour is >= {v['floor']:.2f}" if v["floor_reached_on_val"]
              else f"no step reached {v['floor']:.2f} on val for every seed: the step with the highest mean val colour")
    word = {True: "holds", False: "does not hold"}
    return (f"Colour probe (test) at step {v['budget']} ({budget}):\n\n"
            "| run | real labels | shuffled labels | real − shuffled |\n|---:|---:|---:|---:|\n" + rows + "\n\n"
            f"Real labels >= {v['floor']:.2f} on every seed: {word[v['real_holds']]}. Shuffled at least "
            f"{v['margin']:.2f} below on every seed: {word[v['negative_holds']]}. The positive control "
            f"{'counts' if v['counts'] else 'does not count'}.\n\n"
            f"Runs (studies/positive_control/study_positive.sh; every command in "
            f"positive_control.json), e.g. `{v['commands'][0]}`\n")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="what", required=True)
    recipe = sub.add_parser("recipe", help="print the recipe kept: NAME=CURVE.json of each seed-0 real run")
    recipe.add_argument("curves", nargs="+")
    check = sub.add_parser("verdict", help="the budget and the verdict")
    check.add_argument("--real", nargs="+", required=True)
    check.add_argument("--shuffled", nargs="+", required=True)
    check.add_argument("--out", required=True)
    a = parser.parse_args(sys.argv[1:] if argv is None else argv)
    read = lambda paths: read_json_files(paths, "run python -m studies.probes.probe_curve for it first")  # noqa: E731
    if a.what == "recipe":
        bad = [c for c in a.curves if "=" not in c]
        if bad:
            raise CapawareError(bad[0], "not NAME=CURVE.json",
                                "name each recipe's curve, e.g. layer4_10x=runs/.../probe_curve.json")
        names, paths = zip(*(c.split("=", 1) for c in a.curves))
        print(choose_recipe(dict(zip(names, read(list(paths))))))
        return
    pc = load_declaration().positive_control
    v = verdict(read(a.real), read(a.shuffled), pc.colour_floor, pc.shuffled_margin)
    text = markdown(v)
    write_text(Path(a.out) / "positive_control.md", text)
    write_text(Path(a.out) / "positive_control.json", json.dumps(with_commit(v), indent=1))
    print(text, end="")


if __name__ == "__main__":
    run_cli(main)
