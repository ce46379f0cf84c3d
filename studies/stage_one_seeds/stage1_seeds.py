"""Stage one over training seeds:
``python -m studies.stage_one_seeds.stage1_seeds PIPELINE_CONFIG RUN SEED... [--machine TEXT]``.

The study profile's Fig. 3 and Fig. 5 tables. For every stage-one config of the pipeline config and
every seed, the study is trained and evaluated as the pipeline's stage1 stage does it: seed 0 is the
pipeline's own run (reused when finished, since studies resume), other seeds write under
RUN/seeds/s<seed>/. The data stay those of the config; the seed changes the network's initialisation,
the batch order and (caption track) the sampled queries. The caption track's seeds share seed 0's
class-pretrained backbone, as every run of the paper shares the ImageNet weights. Then
``studies.stage_one_seeds.retrieval_seeds`` writes RUN/results/stage1_seeds/<study>.{md,json}: mean ± sd per row, and
log-ratio + dense minus each other row, paired by seed (Fig. 5 sweeps: the smallest log-ratio
embedding against every triplet row), and RUN/results/stage1_seeds/verdicts_<pipeline name>.md: one line per study.
Rows of losses published after the paper (embedder.config.LATER_ROWS: Rank-N-Contrast) are paired with
the same reference, each with a verdict line of its own, but stay out of the paper's claims.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import subprocess
import sys
import time
from pathlib import Path

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from capcore.run_layout import RunDir, StudyDir
from embedder.config import LATER_ROWS
from studies.stage_one_seeds.retrieval_seeds import REFERENCE
from capaware.pipeline_plan import Plan, load_pipeline


def seed_overrides(cfg, run: str, seed: int) -> tuple[list[str], RunDir]:
    """Extra overrides of one seed and the run folder its study writes its results under."""
    where = RunDir(run).seed(seed)
    if seed == 0:
        return [], where
    rel = Path(cfg.out_dir).resolve().relative_to(Path(run).resolve())
    extra = [f"seed={seed}", f"out_dir={where.root / rel}"]
    if cfg.model.init == "class-pretrained":
        shared = StudyDir(cfg.out_dir).class_pretrained.model
        if not shared.is_file():
            raise CapawareError(shared, "seed 0's class-pretrained backbone is missing",
                                "run seed 0 first (list 0 among the seeds)")
        extra.append(f"model.init={shared}")
    return extra, where


def comparison(cfg) -> list[str]:
    """studies.stage_one_seeds.retrieval_seeds arguments: who is compared with whom
    (rows of later losses: ``--beside``)."""
    later = {r["loss"] for r in LATER_ROWS.values()}
    suffixes = [f" {d}-D" for d in cfg.dims] or [""]
    beside = [m.name + s for s in suffixes for m in cfg.methods if m.loss in later]
    beside = ["--beside", *beside] if beside else []
    if not cfg.dims:
        return ["--reference", REFERENCE, *beside]
    small = min(cfg.dims)
    triplets = [f"{m.name} {d}-D" for d in cfg.dims for m in cfg.methods if m.loss not in ("log_ratio", *later)]
    return ["--reference", f"{REFERENCE} {small}-D", "--against", *triplets, "--matches", *beside]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config", help="a pipeline config, e.g. studies/stage_one_seeds/configs/pipeline_study.yaml")
    parser.add_argument("run", help="its run folder (seed 0 lives there)")
    parser.add_argument("seeds", type=int, nargs="+")
    parser.add_argument("--machine", default=f"{platform.machine()}, {os.cpu_count()} cores")
    parser.add_argument("--only", nargs="+", default=None, help="run only these studies (config names)")
    args = parser.parse_args(argv)
    plan = Plan(load_pipeline(args.config, args.run))
    summary = RunDir(args.run).results("stage1_seeds")
    verdicts = []
    for entry in plan.stage1:
        cfg = plan._stage1(entry)
        if args.only and cfg.name not in args.only:
            continue
        results, timing = [], []
        for seed in sorted(args.seeds):
            extra, res = seed_overrides(cfg, args.run, seed)
            reused, start = res.retrieval_json(cfg.name).is_file(), time.time()
            cmd = [sys.executable, "-m", "embedder.rows", "--config", entry.config, *entry.overrides, *extra,
                   "--results", str(res.results_root)]
            print(f"[{cfg.name} seed {seed}] {shlex.join(cmd[1:])}", flush=True)
            subprocess.run(cmd, check=True, stdout=subprocess.DEVNULL)
            results.append(str(res.results(cfg.name)))
            timing.append(f"seed {seed} " + ("reused" if reused else f"{time.time() - start:.0f} s"))
        out = summary / cfg.name
        subprocess.run([sys.executable, "-m", "studies.stage_one_seeds.retrieval_seeds", *results, "--out", str(out),
                        "--machine", args.machine, "--timing", ", ".join(timing), *comparison(cfg)],
                       check=True)
        seeds = json.loads(out.with_suffix(".json").read_text())
        verdicts.append(f"| {cfg.name} | {claim(cfg)} | {seeds['verdict'].removeprefix('Verdict: ')} |")
        verdicts += [f"| {cfg.name}: {row} | {row} (after the paper) against {seeds['reference']} | "
                     f"{line.removeprefix('Beside the claim: ')} |" for row, line in seeds.get("beside", {}).items()]
    path = summary / f"verdicts_{plan.cfg.name}.md"
    lines = [f"Paper claims against the study tables (nDCG@10, paired by seed; {args.machine})", "",
             "| study | claim | verdict |", "|---|---|---|", *merge_rows(path, verdicts)]
    write_text(path, "\n".join(lines) + "\n")
    print("\n".join(lines))


def merge_rows(path: Path, rows: list[str]) -> list[str]:
    """``rows`` plus the rows of an earlier verdicts file for studies not run this time (``--only``),
    in the earlier file's order."""
    fresh = {r.split(" | ")[0]: r for r in rows}
    old = [ln for ln in path.read_text().splitlines() if ln.startswith("| ") and not ln.startswith("| study")] \
        if path.is_file() else []
    merged = [fresh.pop(r.split(" | ")[0], r) for r in old]
    return merged + list(fresh.values())


def claim(cfg) -> str:
    if cfg.dims:
        return f"Fig. 5: a {min(cfg.dims)}-D log-ratio embedding matches or beats the triplet ones"
    return f"Fig. 3 ({cfg.data.track}): log-ratio + dense beats every other loss/mining row"


if __name__ == "__main__":
    run_cli(main)
