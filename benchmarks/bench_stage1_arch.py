"""Stage-one training step by trunk: resnet10 (the CPU demo's, issue #36) against resnet18.

``python benchmarks/bench_stage1_arch.py [--threads 1] [--repeats 6]``

One float32 channels_last step (``bench_stage1_precision.model_step``: forward, squared-norm loss,
backward, SGD with momentum) at each demo shape: pose rows (96 images at 64 px), layout rows (96 at
32 px) and class pretraining (64 crops of 48 px). float32 is what ``precision: auto`` runs on CPUs
without native bfloat16, the ones the demo's budget is set for. Median (min) of ``--repeats`` steps,
the two trunks timed in alternation.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_stage1_precision import step_fn  # noqa: E402
from capcore.cpu_isa import cpu_line  # noqa: E402
from timing import median_seconds  # noqa: E402

SHAPES = (("pose row", 96, 64), ("layout row", 96, 32), ("class pretraining", 64, 48))
ARCHS = ("resnet18", "resnet10")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=6)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    print(f"stage-one step by trunk, float32 channels_last, {a.threads} thread(s): "
          f"python benchmarks/bench_stage1_arch.py --threads {a.threads}")
    print(f"# {cpu_line()}, torch {torch.__version__}")
    for what, batch, size in SHAPES:
        timed = median_seconds([step_fn(size, batch, None, torch.channels_last, arch) for arch in ARCHS],
                               a.repeats, warmup=2)
        (base, _), (ours, low) = timed
        print(f"  {what:17s} {batch} x {size} px  resnet18 {base:.3f} s  resnet10 {ours:.3f} s (min {low:.3f})  "
              f"{base / ours:.2f}x faster")


if __name__ == "__main__":
    main()
