"""The self-retrieval study's world: ``python -m studies.self_retrieval.world RUN [--lanes 2]``.

The demo's 120 val and 200 test images made a gallery too small to rank in (the demo pilot's binomial error of R@1
was about 4 points: docs/study_results/self_retrieval_pilot.md), so the study and its pilot run in a world of their
own, the sizes in ``studies.self_retrieval.arms.WORLD``: 1,000 val and 1,000 test images (the paper's 1K test fold)
and an unlabeled pool, the demo's own train images. It lays RUN out as ``make demo`` lays out its run, so the pilot
(``run_pilot``) and the study (``run_study``) read either: ``data/captions`` (the generator), ``features/img.h5`` and
``features/unlabeled_img.h5`` (the class-pretrained stand-in, the paper's ImageNet-class features), seed 0's XE runs
``captioners/img_{att2all2,topdown}`` (they write ``captions/``, the vocabulary) and the joint space
``joint/img/best.pt`` (configs/demo/demo_joint.yaml). Each step is skipped once done and resumes when killed.
"""
from __future__ import annotations

import argparse
import shlex
import sys
from pathlib import Path

from capcore.errors import run_cli
from studies.scst_recipes.run_scst_recipes import finished, run_jobs
from studies.self_retrieval.arms import WORLD
from studies.self_retrieval.run_pilot import CORES, xe_dir, xe_job

PY = shlex.quote(sys.executable)
STAND_IN = "backbone.checkpoint=configs/demo/weights/class_pretrained_resnet10.pt"


def data_job(run: Path) -> tuple[str, Path]:
    out = run / "data" / "captions"
    flags = " ".join(f"--{k.replace('_', '-')} {v}" for k, v in WORLD.items())
    return f"{PY} -m capdata.synthetic captions --out {shlex.quote(str(out))} {flags}", out


def features_jobs(run: Path) -> list[tuple[str, Path]]:
    return [(f"{PY} -m capaware.stage features configs/demo/{cfg}.yaml run_dir={shlex.quote(str(run))} {STAND_IN}",
             run / "features" / out) for cfg, out in (("demo_features_img", "img"),
                                                      ("demo_features_unlabeled_img", "unlabeled_img"))]


def joint_job(run: Path) -> tuple[str, Path]:
    return (f"{PY} -m capaware.stage joint configs/demo/demo_joint.yaml run_dir={shlex.quote(str(run))} "
            "data.features=img", run / "joint" / "img")


def build(run: Path, lanes: int = 2) -> None:
    """Every step not yet done, in order (each later step reads the earlier ones' files)."""
    if not (run / "data" / "captions" / "dataset_coco.json").is_file():
        run_jobs([data_job(run)], 1)
    run_jobs([(cmd, out) for cmd, out in features_jobs(run) if not out.with_suffix(".h5").is_file()], lanes)
    run_jobs([xe_job(run, 0, c) for c in CORES if not finished(xe_dir(run, 0, c))], lanes)
    run_jobs([joint_job(run)], 1)  # a trained space says so and only rescores test (seconds)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the study's run folder (e.g. runs/self_retrieval)")
    parser.add_argument("--lanes", type=int, default=2, help="jobs at a time (one thread each)")
    a = parser.parse_args(argv)
    build(Path(a.run).resolve(), a.lanes)
    print(f"world ready: {a.run}")


if __name__ == "__main__":
    run_cli(main)
