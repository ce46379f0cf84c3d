"""Adam as capaware's trainers build it: torch's fused kernel wherever torch has one.

Why: on the CPU an Adam step over ResNet-18's parameters takes a few times less with the fused kernel
than with the for-loop one (``python benchmarks/bench_adam.py`` measures both, and foreach). The
fused kernel is the same update; it rounds differently (the benchmark prints how far apart after 50
steps), so a run is reproducible with itself, not bitwise with the for-loop Adam.
"""
from __future__ import annotations

import torch


def adam(params, **kwargs) -> torch.optim.Adam:
    """``torch.optim.Adam(params, fused=True, **kwargs)`` (capaware's devices, CPU and CUDA, both have it)."""
    return torch.optim.Adam(params, fused=True, **kwargs)


__all__ = ["adam"]
