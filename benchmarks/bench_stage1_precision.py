"""Stage-one training step by precision and memory layout: which one each demo track should use.

``python benchmarks/bench_stage1_precision.py [--threads 1] [--repeats 8] [--batch 96]``

One step of ``embedder.model``'s resnet18 + 128-D head (forward with the trunk autocast as in
``embedder.train.TrunkHead``, a squared-norm loss, backward, SGD with momentum) on random images of the
demo's sizes: 64 px (pose) and 32 px (layout), under bfloat16 autocast and in float32, in channels_last
and in the default layout. Median (min) of ``--repeats`` steps, the variants timed in alternation.
``embedder.train.memory_format`` and ``configs/demo/demo_layout.yaml`` (float32) follow its numbers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from timing import median_seconds  # noqa: E402

from capcore.device import autocast  # noqa: E402
from embedder.model import build_model  # noqa: E402


def model_step(model, opt, x: torch.Tensor, dtype: torch.dtype | None) -> None:
    """One plain training step: trunk autocast as in ``embedder.train.TrunkHead``, squared-norm loss."""
    with autocast(x.device, dtype):
        features = model.trunk(x)
    loss = model.head(features.float()).pow(2).mean()
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()


def step_fn(size: int, batch: int, dtype: torch.dtype | None, layout: torch.memory_format, arch: str = "resnet18"):
    torch.manual_seed(0)
    model = build_model(arch, 128, "none", "").to(memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=0.01, momentum=0.9)
    x = torch.randn(batch, 3, size, size).contiguous(memory_format=layout)
    return lambda: model_step(model, opt, x, dtype)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=8)
    parser.add_argument("--batch", type=int, default=96)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    print(f"stage-one step, resnet18, batch {a.batch}, {a.threads} thread(s): "
          f"python benchmarks/bench_stage1_precision.py --threads {a.threads} --batch {a.batch}")
    print(f"# {cpu_line()}, torch {torch.__version__}")
    variants = [(name, dtype, fmt_name, fmt) for name, dtype in (("bfloat16", torch.bfloat16), ("float32", None))
                for fmt_name, fmt in (("channels_last", torch.channels_last), ("default", torch.contiguous_format))]
    for size in (64, 32):
        timed = median_seconds([step_fn(size, a.batch, dtype, fmt) for _, dtype, _, fmt in variants], a.repeats,
                               warmup=2)
        fastest = min(med for med, _ in timed)
        for (name, _, fmt_name, _), (med, low) in zip(variants, timed):
            print(f"  {size:2d} px  {name:8s} {fmt_name:13s} {med:.3f} s (min {low:.3f})  "
                  f"{med / fastest:.2f}x the fastest")


if __name__ == "__main__":
    main()
