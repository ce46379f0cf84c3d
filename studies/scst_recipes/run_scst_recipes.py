"""SCST recipes over captioner seeds:
``python -m studies.scst_recipes.run_scst_recipes PIPELINE_CONFIG RUN SEED... [--lanes 2]``.

The comparison of issue #26, on a finished pipeline run (stage one, features and seed 0's XE
captioners): every SCST config of the pipeline config is trained from its XE run with each of 8
recipes, the product of

- the baseline: ``greedy`` (the paper's: the greedy caption's reward, Rennie et al.) or ``mean`` (the
  new self-critical of self-critical.pytorch: the mean reward of the image's other samples);
- the end token in the reward (``eos``) or not (``noeos``): rl.reward.eos;
- the XE term of the mixed objective at each weight of ``--xe-weights`` (default 1: ``xe``; 3: ``xe3``) or none
  (``plain``): train.xe_weight;
- with ``--bleu4-weights``, a BLEU-4 term of the reward at each weight (``-b0.5``; rl.reward.bleu4_weight,
  self-critical.pytorch's bleu_reward_weight; 0, the default, adds no suffix).

Everything else is the config's (5 samples per image for both baselines, temperature, lr, epochs), so
a recipe differs from its neighbours in one setting. Seed 0's XE runs are the pipeline's own; other
seeds' XE runs are trained first under RUN/seeds/s<seed>/captioners/ (as studies/table1_seeds/table1_seeds.sh
names them, so both scripts share them). SCST runs write under RUN/scst_recipes/<recipe>/s<seed>/.
Jobs run ``--lanes`` at a time, one thread each; a finished job is not redone. Then
``studies.scst_recipes.scst_recipes`` writes RUN/results/scst_recipes/scst_recipes.{md,json}: what each recipe did,
over seeds, and the recipe val chooses; and Table 1 over the seeds with that recipe's SCST runs
(eval.reporting.results_table per seed, then studies.table1_seeds.results_seeds) in RUN/results/scst_recipes/table1/.
"""
from __future__ import annotations

import argparse
import itertools
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from capcore.atomic import write_text
from capcore.cpu_isa import cpu_line
from capcore.errors import CapawareError, run_cli
from eval.reporting import results_table
from studies.scst_recipes import scst_recipes
from studies.table1_seeds import results_seeds
from capaware.pipeline_plan import Plan, load_pipeline


def recipes(xe_weights: list[float], bleu4_weights: list[float] = (0.0,)) -> dict[str, list[str]]:
    """Recipe name -> its overrides: baseline x end token x (no XE term, or each XE weight; weight 1 is
    named ``xe``, another ``xe<weight>``) x BLEU-4 weight of the reward (0: no suffix, another ``-b<w>``)."""
    out = {}
    objectives = [("plain", 0.0)] + [("xe" if w == 1 else f"xe{w:g}", w) for w in xe_weights]
    for base, eos, (objective, weight), bleu in itertools.product(("greedy", "mean"), (True, False), objectives,
                                                                  bleu4_weights):
        name = f"{base}-{'eos' if eos else 'noeos'}-{objective}" + (f"-b{bleu:g}" if bleu else "")
        out[name] = [f"train.baseline={base}", f"reward.eos={str(eos).lower()}", f"train.xe_weight={weight}",
                     f"reward.bleu4_weight={bleu}"]
    return dict(sorted(out.items()))


def parse(cmd: str) -> tuple[str, str, str]:
    """("python -m capaware.stage scst CONFIG run_dir=R data.features=F") -> (CONFIG, features, model name)."""
    words = shlex.split(cmd)
    config = next(w for w in words if w.endswith((".yaml", ".yml")))
    feats = [w.split("=", 1)[1] for w in words if w.startswith("data.features=")][-1]
    model = Path(config).stem.removeprefix("demo_").removeprefix("coco_").removesuffix("_scst")
    return config, feats, model


def finished(out: Path) -> bool:
    """The stage script's last output exists and is newer than the weights (as table1_seeds.sh checks)."""
    g, best = out / "grounding_test.json", out / "best.pt"
    return g.is_file() and best.is_file() and g.stat().st_mtime >= best.stat().st_mtime


def run_jobs(jobs: list[tuple[str, Path]], lanes: int) -> None:
    """Run ``(command, out_dir)`` jobs, ``lanes`` at a time; each logs to <out_dir>.log."""
    # the stage scripts call `python`: the one running this script (its venv), wherever PATH points
    env = dict(os.environ, OMP_NUM_THREADS="1",
               PATH=os.pathsep.join([str(Path(sys.executable).parent), os.environ.get("PATH", "")]))

    def one(job):
        cmd, out = job
        out.parent.mkdir(parents=True, exist_ok=True)
        start = time.perf_counter()
        with open(f"{out}.log", "w") as log:
            code = subprocess.run(cmd, shell=True, stdout=log, stderr=subprocess.STDOUT, env=env).returncode
        seconds = time.perf_counter() - start
        if code == 0:  # the job's wall (beside the others of its lanes): what a study's plan prices a run at
            Path(f"{out}.seconds").write_text(f"{seconds:.1f}\n")
        print(f"{'done' if code == 0 else 'FAILED'}: {out} ({seconds:.0f} s)", flush=True)
        return code, out

    with ThreadPoolExecutor(lanes) as pool:
        failed = [out for code, out in pool.map(one, jobs) if code != 0]
    if failed:
        raise CapawareError(failed[0], f"{len(failed)} job(s) failed", f"see {failed[0]}.log")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="pipeline config (e.g. configs/demo/pipeline_demo.yaml)")
    parser.add_argument("run", help="its finished run folder (e.g. runs/demo)")
    parser.add_argument("seeds", nargs="+", type=int)
    parser.add_argument("--lanes", type=int, default=2, help="jobs at a time (one thread each)")
    parser.add_argument("--only", nargs="*", default=None, help="run only these recipes")
    parser.add_argument("--xe-weights", type=float, nargs="+", default=[1.0], help="XE weights of the xe recipes")
    parser.add_argument("--bleu4-weights", type=float, nargs="+", default=[0.0],
                        help="BLEU-4 weights of the reward (rl.reward.bleu4_weight; 0: CIDEr-D alone)")
    parser.add_argument("--extra", nargs="*", default=[], help="overrides for every SCST job, e.g. train.lr=1e-4")
    parser.add_argument("--name", default="scst_recipes",
                        help="folder under RUN (and RUN/results) for these jobs; another name keeps sweeps apart")
    a = parser.parse_args(argv)
    run = Path(a.run)
    plan = Plan(load_pipeline(a.config, str(run)))
    table = recipes(a.xe_weights, a.bleu4_weights)
    chosen = {k: v for k, v in table.items() if a.only is None or k in a.only}

    xe_jobs, rl_jobs, listed = [], [], []
    for seed in a.seeds:
        root = run / "captioners" if seed == 0 else run / "seeds" / f"s{seed}" / "captioners"
        for cmd in plan.commands("captioners"):
            _, feats, model = parse(cmd)
            out = root / f"{feats}_{model}"
            if seed == 0 and not finished(out):
                raise CapawareError(out, "seed 0's XE run is not finished", f"run the pipeline first: {a.config}")
            if not finished(out):
                xe_jobs.append((f"{cmd} seed={seed} out_dir={shlex.quote(str(out))}", out))
        for cmd in plan.commands("rl"):
            _, feats, model = parse(cmd)
            xe_dir = root / f"{feats}_{model}"
            for name, over in chosen.items():
                out = run / a.name / name / f"s{seed}" / f"{feats}_{model}_scst"
                listed.append({"recipe": name, "seed": seed, "run": f"{feats}_{model}", "xe_run": str(xe_dir),
                               "scst_run": str(out)})
                if not finished(out):
                    extra = [f"seed={seed}", f"init={xe_dir / 'best.pt'}", f"out_dir={out}", *over, *a.extra]
                    rl_jobs.append((cmd + " " + shlex.join(extra), out))
    print(f"{len(xe_jobs)} XE and {len(rl_jobs)} SCST jobs to run, {a.lanes} at a time", flush=True)
    run_jobs(xe_jobs, a.lanes)
    rl_jobs.sort(key=lambda job: "topdown" not in str(job[1]))  # the longest first: lanes end together
    run_jobs(rl_jobs, a.lanes)
    jobs_file = run / a.name / "jobs.json"
    write_text(jobs_file, json.dumps({"jobs": listed, "recipes": table, "extra": a.extra}, indent=1))
    machine = f"{cpu_line()}, {os.cpu_count()} cores, {platform.machine()}"
    results = run / "results" / a.name
    scst_recipes.main([str(jobs_file), "--out", str(results), "--machine", machine])
    chosen_recipe = json.loads((results / "scst_recipes.json").read_text())["chosen"]
    tables = []
    for seed in a.seeds:
        dirs = list(dict.fromkeys(d for j in listed if j["seed"] == seed and j["recipe"] == chosen_recipe
                                  for d in (j["xe_run"], j["scst_run"])))
        out = results / "table1" / f"s{seed}"
        results_table.write_table(dirs, out)
        tables.append(str(out / "captioning.json"))
    results_seeds.main([*tables, "--out", str(results / "table1"),
                        "--machine", f"{machine}; SCST recipe {chosen_recipe}"])


if __name__ == "__main__":
    run_cli(main)
