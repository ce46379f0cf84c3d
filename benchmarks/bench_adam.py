"""Adam step over ResNet-18's parameters: for-loop, foreach and fused (``capcore.optim.adam``).

``python benchmarks/bench_adam.py [--threads 1] [--repeats 20]``

Prints the median (and min) time of one step of each on random gradients, and how far the fused
update lands from the for-loop one after 50 steps (it rounds differently: not bitwise equal).
"""
from __future__ import annotations

import argparse
import copy
import sys
from pathlib import Path

import torch
import torchvision

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from timing import median_seconds  # noqa: E402

VARIANTS = {"for-loop": {"foreach": False}, "foreach": {"foreach": True}, "fused": {"fused": True}}


def optimizers(base: torch.nn.Module):
    out = {}
    for name, kw in VARIANTS.items():
        params = list(copy.deepcopy(base).parameters())
        for p in params:
            p.grad = torch.randn_like(p)
        out[name] = (params, torch.optim.Adam(params, lr=1e-3, **kw))
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=20)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    opts = optimizers(torchvision.models.resnet18())
    timed = median_seconds([o.step for _, o in opts.values()], a.repeats)
    print(f"# {cpu_line()}, torch {torch.__version__}, {torch.get_num_threads()} thread(s)")
    print(f"Adam step, ResNet-18 ({sum(p.numel() for p in opts['fused'][0]) / 1e6:.1f}M parameters), "
          f"{a.threads} thread(s): python benchmarks/bench_adam.py --threads {a.threads}")
    loop = timed[0][0]
    for (name, _), (med, low) in zip(opts.items(), timed):
        print(f"  {name:9s} {med * 1e3:6.1f} ms (min {low * 1e3:.1f})  {loop / med:.2f}x the for-loop")
    torch.manual_seed(1)
    fresh = optimizers(torchvision.models.resnet18())
    g = torch.Generator().manual_seed(2)
    for _ in range(50):
        grads = None
        for params, opt in fresh.values():
            if grads is None:
                grads = [torch.randn(p.shape, generator=g) for p in params]
            for p, gr in zip(params, grads):
                p.grad = gr.clone()
            opt.step()
    ref = fresh["for-loop"][0]
    for name in ("foreach", "fused"):
        diff = max(float((x - y).detach().abs().max()) for x, y in zip(ref, fresh[name][0]))
        print(f"  after 50 steps, {name} vs for-loop: max |difference| {diff:.1e}")


if __name__ == "__main__":
    main()
