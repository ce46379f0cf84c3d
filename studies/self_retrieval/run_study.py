"""The self-retrieval study, as declared: ``python -m studies.self_retrieval.run_study RUN [--lanes 2]``.

RUN is the study's world (``python -m studies.self_retrieval.world RUN``). Seed by seed of the declaration
(studies/self_retrieval/configs/declaration_self_retrieval.yaml): the seed's two XE runs, then every arm the seed
runs (the primary pair, and on the secondary seeds the secondary arms) from them, each SCST run decoding and scoring
test as the stage does and ``eval.self_retrieval`` ranking test's images by each caption. A finished seed is kept
as ``docs/study_results/self_retrieval/seed_<seed>.json`` (per run: the test metrics, the self-retrieval R@1/5/10,
unique and novel captions, every image's CIDEr-D and the rank of its own image; the machine, the job walls, the
declaration's stamp): commit it, and a later sitting goes on from the next seed. Jobs run ``--lanes`` at a time,
one thread each; a killed sitting resumes (finished jobs are not redone). ``studies.self_retrieval.study_table``
writes the tables and the verdict from the kept records alone.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
from pathlib import Path

from capcore.atomic import write_text
from capcore.cpu_isa import cpu_line
from capcore.errors import CapawareError, run_cli
from studies.provenance import with_commit
from studies.scst_recipes.run_scst_recipes import finished, run_jobs
from studies.self_retrieval.declaration import DEFAULT, ROOT, load_declaration, stamp
from studies.self_retrieval.run_pilot import PY, job_seconds, scst_command, xe_dir, xe_job

RECORDS = ROOT / "docs" / "study_results" / "self_retrieval"


def study_dir(run: Path, arm: str, seed: int, core: str) -> Path:
    return run / "self_retrieval_study" / arm / f"s{seed}" / f"img_{core}"


def study_job(run: Path, arm: str, seed: int, core: str) -> tuple[str, Path]:
    out = study_dir(run, arm, seed, core)
    joint = shlex.quote(str(run / "joint" / "img" / "best.pt"))
    test = f"{PY} -m eval.self_retrieval {shlex.quote(str(out))} --joint {joint} --split test"
    return f"{scst_command(run, arm, seed, core, out)} && {test}", out


def run_record(out: Path) -> dict:
    """One SCST run's test numbers and per-image values, from the files the stage and eval.self_retrieval wrote."""
    metrics = json.loads((out / "metrics_test.json").read_text())
    sr = json.loads((out / "self_retrieval_test.json").read_text())
    per_image = {p["image_id"]: p["CIDEr-D"] for p in json.loads((out / "per_image_test.json").read_text())}
    ranks = {p["image_id"]: p["rank"] for p in sr["per_image"]}
    if set(per_image) != set(ranks):
        raise CapawareError(out, "the captions scored and the captions ranked are of different images",
                            "rerun eval.self_retrieval on this run")
    ids = sorted(ranks)
    disc = metrics.get("discriminativeness") or {}
    return {"metrics": metrics["metrics"], "r1": sr["r1"], "r5": sr["r5"], "r10": sr["r10"],
            "unique": disc.get("unique_captions"), "novel": disc.get("novel_captions"),
            "distinct": disc.get("distinct_captions"), "bad_endings": disc.get("bad_endings"), "n_images": len(ids),
            "image_ids": ids,
            "cider_d_per_image": [round(per_image[i], 6) for i in ids], "rank_per_image": [ranks[i] for i in ids],
            "signature": metrics.get("scst_signature"), "seconds": job_seconds(out)}


def run_seed(run: Path, seed: int, decl, lanes: int) -> dict:
    """Train what the seed still lacks, then its record."""
    cores, arms = decl.design.captioners, decl.arms_of(seed)
    run_jobs([xe_job(run, seed, c) for c in cores if not finished(xe_dir(run, seed, c))], lanes)
    jobs = [study_job(run, arm, seed, c) for arm in arms for c in cores
            if not (study_dir(run, arm, seed, c) / "self_retrieval_test.json").is_file()]
    run_jobs(sorted(jobs, key=lambda job: "topdown" not in str(job[1])), lanes)  # the longest first
    return {"seed": seed, "machine": f"{cpu_line()}, {os.cpu_count()} cores, {platform.machine()}", "lanes": lanes,
            "xe_seconds": {c: job_seconds(xe_dir(run, seed, c)) for c in cores},
            "runs": {arm: {c: run_record(study_dir(run, arm, seed, c)) for c in cores} for arm in arms}}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the study's world (python -m studies.self_retrieval.world RUN)")
    parser.add_argument("--declaration", default=str(DEFAULT))
    parser.add_argument("--records", default=str(RECORDS), help="where finished seeds are kept")
    parser.add_argument("--lanes", type=int, default=2, help="jobs at a time (one thread each)")
    parser.add_argument("--max-seeds", type=int, default=None, help="stop after this many new seeds (a sitting)")
    a = parser.parse_args(argv)
    run, decl = Path(a.run).resolve(), load_declaration(a.declaration)
    if not (run / "joint" / "img" / "best.pt").is_file():
        raise CapawareError(run / "joint" / "img" / "best.pt", "the study's world is not built",
                            f"python -m studies.self_retrieval.world {a.run}")
    todo = [s for s in decl.design.seeds if not (Path(a.records) / f"seed_{s}.json").is_file()]
    print(f"{len(decl.design.seeds) - len(todo)} of {len(decl.design.seeds)} seeds kept; "
          f"this sitting: {todo[:a.max_seeds] if a.max_seeds else todo}", flush=True)
    for seed in todo[:a.max_seeds] if a.max_seeds else todo:
        record = {**run_seed(run, seed, decl, a.lanes), "declared": stamp(decl, a.declaration)}
        path = Path(a.records) / f"seed_{seed}.json"
        write_text(path, json.dumps(with_commit(record)))
        print(f"seed {seed} kept: {path}", flush=True)


if __name__ == "__main__":
    run_cli(main)
