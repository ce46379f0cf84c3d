"""``capaware plan``'s predictions against a measured run on this machine (issue #47: within 2x):
``python benchmarks/bench_plan.py demo | rehearsal [--run DIR]``

``demo``: ``capaware plan configs/demo/pipeline_demo.yaml --run DIR``, then the pipeline itself into DIR;
``rehearsal``: the COCO rehearsal tree (capdata.synthetic.coco_release) written into DIR, planned, then run
with its stand-in ImageNet weights. The measured time of each stage is the pipeline's own ``[stage] done in
N s`` line; the table prints predicted, measured and their ratio per stage and for the whole run, with the
machine. Run it on an otherwise idle machine: the probes and the run must see the same cores.
"""
from __future__ import annotations

import argparse
import json
import os
import re
import shlex
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capcore.cpu_isa import cpu_line  # noqa: E402

STAGES = ("data", "stage1", "features", "captioners", "rl")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("which", choices=("demo", "rehearsal"))
    ap.add_argument("--run", default=None, help="the run folder [a temporary one]")
    a = ap.parse_args()
    print("$ python " + shlex.join(sys.argv), flush=True)
    run = Path(a.run or tempfile.mkdtemp(prefix=f"plan_{a.which}_"))
    run.mkdir(parents=True, exist_ok=True)  # the plan's JSON goes there; the demo's pipeline writes into it too
    env = dict(os.environ)
    if a.which == "demo":
        config = ROOT / "configs/demo/pipeline_demo.yaml"
        pipeline_run = run
    else:
        subprocess.run([sys.executable, "-m", "capdata.synthetic.coco_release", str(run)], check=True, cwd=ROOT,
                       capture_output=True)
        config, pipeline_run = run / "pipeline_coco_rehearsal.yaml", run / "run"
        env["TORCH_HOME"] = str(run / "torch")
    print(f"{cpu_line()}, {os.cpu_count()} cores; load average before start {os.getloadavg()[0]:.2f}", flush=True)
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "capaware", "plan", str(config), "--run", str(pipeline_run), "--json",
                    str(run / "plan.json")], check=True, cwd=ROOT, env=env, stdout=subprocess.DEVNULL)
    print(f"capaware plan took {time.perf_counter() - t0:.0f} s", flush=True)
    out = subprocess.run(["bash", "scripts/pipeline.sh", str(config), "--run", str(pipeline_run)], cwd=ROOT, env=env,
                         capture_output=True, text=True)
    if out.returncode:
        raise SystemExit(out.stdout[-2000:] + out.stderr[-2000:])
    measured = {m[1]: float(m[2]) for m in re.finditer(r"\[(\w+)\] done in (\d+) s", out.stdout)}
    predicted = {k: v["seconds"] for k, v in json.loads((run / "plan.json").read_text()).items()}
    print("| stage | predicted (s) | measured (s) | predicted / measured |\n|---|---:|---:|---:|")
    for stage in STAGES:
        if stage in measured:
            p, m = predicted[stage], measured[stage]
            print(f"| {stage} | {p:.0f} | {m:.0f} | {p / max(m, 1):.2f} |")
    p, m = sum(predicted[s] for s in STAGES), sum(measured.get(s, 0) for s in STAGES)
    print(f"| stages priced | {p:.0f} | {m:.0f} | {p / m:.2f} |")
    rest = sum(v for k, v in measured.items() if k not in STAGES)
    print(f"(not priced: scores and report, measured {rest:.0f} s)")


if __name__ == "__main__":
    main()
