"""The host's speed right now: float32 GFLOP/s of a 1024 x 1024 matrix product on one thread and on two.

Why: on shared cloud machines the same CPU model ran the same code up to 2x slower from one hour to the next
(docs/devices.md, issue #55). A timing is read beside this probe taken just before it, with nothing else running:
``python benchmarks/host_speed.py``. Issue #55's reference on the 2-vCPU Intel Xeon (family 6, model 207): 105 and
210 GFLOP/s.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from benchmarks.timing import median_seconds  # noqa: E402
from capcore.cpu_isa import cpu_line  # noqa: E402


def gflops(threads: int, n: int = 1024, repeats: int = 30) -> float:
    torch.set_num_threads(threads)
    a, b = torch.randn(n, n), torch.randn(n, n)
    (median, _), = median_seconds([lambda: a @ b], repeats)
    return 2 * n ** 3 / median / 1e9


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", type=int, nargs="+", default=[1, 2])
    args = ap.parse_args(argv)
    print(cpu_line())
    print(" | ".join(f"{gflops(t):.0f} GFLOP/s on {t} thread{'s' * (t > 1)}" for t in args.threads))


if __name__ == "__main__":
    main()
