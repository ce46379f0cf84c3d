"""The self-retrieval study's pilot, on val: ``python -m studies.self_retrieval.run_pilot RUN SEED... [--lanes 2]``.

Issue #66's study (baseline SCST against self-retrieval SCST, Liu et al. 2018) must be declared, with a power plan,
before it runs on test. A power plan needs the spread of its contrasts between captioner seeds, and this pilot
measures it on the **val** split, never test: for each captioner seed and each of the demo's two captioners on the
Img features, the demo's SCST recipe (``configs/demo/demo_<core>_scst.yaml``, the baseline, alpha = 0) and the same
recipe with the self-retrieval reward (SR-FL: ``retrieval.weight=1``, the run's own joint space
``RUN/joint/img/best.pt``), both from the seed's XE run. Every SCST run's best.pt then decodes val (beam 2, as test
is decoded) and ``eval.self_retrieval`` ranks val's images by each caption; val CIDEr-D is the run's own best
validation (history.json, pycocoevalcap on beam-2 val captions).

RUN is a finished ``make demo`` run (its XE runs, features, labels and joint spaces). Seed 0's XE runs are the
demo's; other seeds' are trained under ``RUN/seeds/s<seed>/captioners/`` as studies/scst_recipes names them (so the
two share them). SCST runs go to ``RUN/self_retrieval_pilot/<arm>/s<seed>/img_<core>``. Jobs run ``--lanes`` at a
time, one thread each; a finished job is not redone, so a killed pilot resumes. Written:
``RUN/results/self_retrieval_pilot/pilot.json`` (per run: arm, seed, core, val R@1/5/10, val CIDEr-D; the machine)
and ``pilot.md``; ``studies.self_retrieval.power_plan`` reads the JSON.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
from pathlib import Path

from capcore.atomic import write_text
from capcore.cpu_isa import cpu_line
from capcore.errors import CapawareError, run_cli
from studies.provenance import with_commit
from studies.scst_recipes.run_scst_recipes import finished, run_jobs
from studies.self_retrieval.arms import ARMS, overrides

CORES = ("att2all2", "topdown")
PAIRED = ("baseline", "sr_fl")  # the arms the pilot's table pairs and the power plan reads
PY = shlex.quote(sys.executable)


def xe_dir(run: Path, seed: int, core: str) -> Path:
    root = run / "captioners" if seed == 0 else run / "seeds" / f"s{seed}" / "captioners"
    return root / f"img_{core}"


def scst_dir(run: Path, arm: str, seed: int, core: str) -> Path:
    return run / "self_retrieval_pilot" / arm / f"s{seed}" / f"img_{core}"


def xe_job(run: Path, seed: int, core: str) -> tuple[str, Path]:
    out = xe_dir(run, seed, core)
    args = [f"configs/demo/demo_{core}.yaml", f"run_dir={run}", "data.features=img", "train.epochs=8", f"seed={seed}",
            f"out_dir={out}"]  # train.epochs as the demo's pipeline config trains them
    return f"{PY} -m capaware.stage xe {shlex.join(args)}", out


def scst_command(run: Path, arm: str, seed: int, core: str, out: Path) -> str:
    """The arm's SCST run from the seed's XE run: the demo's recipe and epochs, the arm's overrides
    (studies/self_retrieval/arms.py) and nothing else. The stage decodes and scores test as every SCST run does."""
    args = [f"configs/demo/demo_{core}_scst.yaml", f"run_dir={run}", "data.features=img", "train.epochs=3",
            f"seed={seed}", f"init={xe_dir(run, seed, core) / 'best.pt'}", f"out_dir={out}", *overrides(arm, run)]
    return f"{PY} -m capaware.stage scst {shlex.join(args)}"


def scst_job(run: Path, arm: str, seed: int, core: str) -> tuple[str, Path]:
    out = scst_dir(run, arm, seed, core)
    q = shlex.quote
    val = (f"{PY} -m captioners.predict --checkpoint {q(str(out / 'best.pt'))} --split val --method beam "
           f"--beam-size 2 --out {q(str(out / 'preds_val.json'))} --no-progress && "
           f"{PY} -m eval.self_retrieval {q(str(out))} --joint {q(str(run / 'joint' / 'img' / 'best.pt'))} --split val")
    return f"{scst_command(run, arm, seed, core, out)} && {val}", out


def record(run: Path, arm: str, seed: int, core: str) -> dict:
    out = scst_dir(run, arm, seed, core)
    sr = json.loads((out / "self_retrieval_val.json").read_text())
    history = json.loads((out / "history.json").read_text())
    best = max((h for h in history if h.get("eligible", True)), key=lambda h: h["cider_d"])  # best.pt's validation
    return {"arm": arm, "seed": seed, "core": core, "val_r1": sr["r1"], "val_r5": sr["r5"], "val_r10": sr["r10"],
            "val_images": sr["n_images"], "val_cider_d": best["cider_d"], "best_epoch": best["epoch"],
            "run": str(out), "seconds": job_seconds(out)}


def job_seconds(out: Path) -> float | None:
    """The job's wall, as run_jobs kept it beside the run (None for a run made before it kept one)."""
    path = Path(f"{out}.seconds")
    return float(path.read_text()) if path.is_file() else None


def markdown(rows: list[dict], machine: str) -> str:
    lines = [f"### Self-retrieval pilot, val split ({machine})", "",
             "| core | seed | baseline R@1 | SR-FL R@1 | SR − base | baseline CIDEr-D | SR-FL CIDEr-D | SR − base |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    by = {(r["core"], r["seed"], r["arm"]): r for r in rows}
    for core, seed in sorted({(r["core"], r["seed"]) for r in rows if r["arm"] in PAIRED}):
        b, s = by[(core, seed, "baseline")], by[(core, seed, "sr_fl")]
        lines.append(f"| {core} | {seed} | {b['val_r1']:.1f} | {s['val_r1']:.1f} | {s['val_r1'] - b['val_r1']:+.1f} "
                     f"| {b['val_cider_d']:.3f} | {s['val_cider_d']:.3f} "
                     f"| {s['val_cider_d'] - b['val_cider_d']:+.3f} |")
    lines += ["", "| arm | core | seed | R@1 | CIDEr-D | job wall (s) |", "|---|---|---:|---:|---:|---:|"]
    lines += [f"| {r['arm']} | {r['core']} | {r['seed']} | {r['val_r1']:.1f} | {r['val_cider_d']:.3f} "
              f"| {'' if r.get('seconds') is None else format(r['seconds'], '.0f')} |" for r in rows]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a finished make demo run folder (e.g. runs/demo)")
    parser.add_argument("seeds", nargs="+", type=int)
    parser.add_argument("--lanes", type=int, default=2, help="jobs at a time (one thread each)")
    parser.add_argument("--arms", nargs="+", default=list(PAIRED), choices=list(ARMS),
                        help=f"arms to run (studies/self_retrieval/arms.py) [{' '.join(PAIRED)}]")
    parser.add_argument("--arm-seeds", nargs="+", type=int, default=None,
                        help="the seeds of arms beyond the paired two, to price them [all seeds]")
    a = parser.parse_args(argv)
    run = Path(a.run).resolve()
    if not (run / "joint" / "img" / "best.pt").is_file():
        raise CapawareError(run / "joint" / "img" / "best.pt", "no joint space in this run", "run make demo first")
    if 0 in a.seeds and not all(finished(xe_dir(run, 0, c)) for c in CORES):
        raise CapawareError(run, "seed 0's XE runs are not finished",
                            "run make demo, or python -m studies.self_retrieval.world RUN, first")
    plan = [(arm, s) for arm in a.arms for s in a.seeds
            if arm in PAIRED or a.arm_seeds is None or s in a.arm_seeds]
    xe = [xe_job(run, s, c) for s in a.seeds for c in CORES if not finished(xe_dir(run, s, c))]
    rl = [scst_job(run, arm, s, c) for arm, s in plan for c in CORES
          if not (scst_dir(run, arm, s, c) / "self_retrieval_val.json").is_file()]
    print(f"{len(xe)} XE and {len(rl)} SCST jobs to run, {a.lanes} at a time", flush=True)
    run_jobs(xe, a.lanes)
    run_jobs(sorted(rl, key=lambda job: "topdown" not in str(job[1])), a.lanes)  # the longest first
    machine = f"{cpu_line()}, {os.cpu_count()} cores, {platform.machine()}"
    rows = [record(run, arm, s, c) for arm, s in plan for c in CORES]
    out = run / "results" / "self_retrieval_pilot"
    xe_seconds = {str(s): {c: job_seconds(xe_dir(run, s, c)) for c in CORES} for s in a.seeds}
    write_text(out / "pilot.json", json.dumps(with_commit({"machine": machine, "split": "val", "lanes": a.lanes,
                                                           "rows": rows, "xe_seconds": xe_seconds}), indent=1))
    text = markdown(rows, machine)
    write_text(out / "pilot.md", text)
    print(text + f"-> {out}/pilot.{{json,md}}")


if __name__ == "__main__":
    run_cli(main)
