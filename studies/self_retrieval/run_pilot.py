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

CORES = ("att2all2", "topdown")
ARMS = {"baseline": [], "sr_fl": ["retrieval.weight=1", "retrieval.model={run}/joint/img/best.pt"]}
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


def scst_job(run: Path, arm: str, seed: int, core: str) -> tuple[str, Path]:
    out = scst_dir(run, arm, seed, core)
    over = [o.format(run=run) for o in ARMS[arm]]
    args = [f"configs/demo/demo_{core}_scst.yaml", f"run_dir={run}", "data.features=img", "train.epochs=3",
            f"seed={seed}", f"init={xe_dir(run, seed, core) / 'best.pt'}", f"out_dir={out}", *over]
    q = shlex.quote
    val = (f"{PY} -m captioners.predict --checkpoint {q(str(out / 'best.pt'))} --split val --method beam "
           f"--beam-size 2 --out {q(str(out / 'preds_val.json'))} --no-progress && "
           f"{PY} -m eval.self_retrieval {q(str(out))} --joint {q(str(run / 'joint' / 'img' / 'best.pt'))} --split val")
    return f"{PY} -m capaware.stage scst {shlex.join(args)} && {val}", out


def record(run: Path, arm: str, seed: int, core: str) -> dict:
    out = scst_dir(run, arm, seed, core)
    sr = json.loads((out / "self_retrieval_val.json").read_text())
    history = json.loads((out / "history.json").read_text())
    best = max((h for h in history if h.get("eligible", True)), key=lambda h: h["cider_d"])  # best.pt's validation
    return {"arm": arm, "seed": seed, "core": core, "val_r1": sr["r1"], "val_r5": sr["r5"], "val_r10": sr["r10"],
            "val_images": sr["n_images"], "val_cider_d": best["cider_d"], "best_epoch": best["epoch"],
            "run": str(out)}


def markdown(rows: list[dict], machine: str) -> str:
    lines = [f"### Self-retrieval pilot, val split ({machine})", "",
             "| core | seed | baseline R@1 | SR-FL R@1 | SR − base | baseline CIDEr-D | SR-FL CIDEr-D | SR − base |",
             "|---|---:|---:|---:|---:|---:|---:|---:|"]
    by = {(r["core"], r["seed"], r["arm"]): r for r in rows}
    for core, seed in sorted({(r["core"], r["seed"]) for r in rows}):
        b, s = by[(core, seed, "baseline")], by[(core, seed, "sr_fl")]
        lines.append(f"| {core} | {seed} | {b['val_r1']:.1f} | {s['val_r1']:.1f} | {s['val_r1'] - b['val_r1']:+.1f} "
                     f"| {b['val_cider_d']:.3f} | {s['val_cider_d']:.3f} "
                     f"| {s['val_cider_d'] - b['val_cider_d']:+.3f} |")
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="a finished make demo run folder (e.g. runs/demo)")
    parser.add_argument("seeds", nargs="+", type=int)
    parser.add_argument("--lanes", type=int, default=2, help="jobs at a time (one thread each)")
    a = parser.parse_args(argv)
    run = Path(a.run).resolve()
    if not (run / "joint" / "img" / "best.pt").is_file():
        raise CapawareError(run / "joint" / "img" / "best.pt", "no joint space in this run", "run make demo first")
    if 0 in a.seeds and not all(finished(xe_dir(run, 0, c)) for c in CORES):
        raise CapawareError(run, "seed 0's XE runs are not finished", "run make demo first")
    xe = [xe_job(run, s, c) for s in a.seeds for c in CORES if not finished(xe_dir(run, s, c))]
    rl = [scst_job(run, arm, s, c) for arm in ARMS for s in a.seeds for c in CORES
          if not (scst_dir(run, arm, s, c) / "self_retrieval_val.json").is_file()]
    print(f"{len(xe)} XE and {len(rl)} SCST jobs to run, {a.lanes} at a time", flush=True)
    run_jobs(xe, a.lanes)
    run_jobs(sorted(rl, key=lambda job: "topdown" not in str(job[1])), a.lanes)  # the longest first
    machine = f"{cpu_line()}, {os.cpu_count()} cores, {platform.machine()}"
    rows = [record(run, arm, s, c) for arm in ARMS for s in a.seeds for c in CORES]
    out = run / "results" / "self_retrieval_pilot"
    write_text(out / "pilot.json", json.dumps(with_commit({"machine": machine, "split": "val", "rows": rows}),
                                              indent=1))
    text = markdown(rows, machine)
    write_text(out / "pilot.md", text)
    print(text + f"-> {out}/pilot.{{json,md}}")


if __name__ == "__main__":
    run_cli(main)
