"""Adam as capaware's trainers build it: the one place a ``torch.optim.Adam`` is made.

Two kernels, chosen by each caller and kept, so that a run's numbers do not move:

- ``fused=True`` (stage one, class pretraining): torch's fused kernel. On the CPU an Adam step over
  ResNet-18's parameters takes a few times less with it than with the for-loop one (``python
  benchmarks/bench_adam.py`` measures both, and foreach). It is the same update, rounded differently
  (the benchmark prints how far apart after 50 steps), so a run is reproducible with itself, not bitwise
  with the for-loop Adam.
- ``fused=False`` (the captioners, stage one's head warm-up): torch's default kernel, chosen by torch
  (the for-loop one on the CPU, foreach on CUDA), exactly as ``torch.optim.Adam(params, ...)`` without a
  kernel argument. Neither ``fused`` nor ``foreach`` is passed: ``fused=False`` would turn foreach off on
  CUDA and change the GPU's numbers (and the optimizer state's ``fused`` field).
"""
from __future__ import annotations

import torch


def adam(params, *, fused: bool = True, **kwargs) -> torch.optim.Adam:
    """``torch.optim.Adam(params, fused=True, **kwargs)`` (capaware's devices, CPU and CUDA, both have it),
    or with ``fused=False`` ``torch.optim.Adam(params, **kwargs)`` (torch's default kernel). ``kwargs``:
    Adam's own (lr, betas, eps, weight_decay...), passed through unchanged."""
    if "foreach" in kwargs:
        raise TypeError("adam(): choose the kernel with fused=True|False, not foreach")
    if fused:
        return torch.optim.Adam(params, fused=True, **kwargs)
    return torch.optim.Adam(params, **kwargs)


__all__ = ["adam"]
