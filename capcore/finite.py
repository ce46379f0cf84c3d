"""Stop a training loop at the first non-finite loss it looks at, in one line that names the run and the fix.

Why: a NaN loss does not raise; Adam turns every weight into NaN at the next step, the loop runs on, and the
damage shows up minutes later as a crash somewhere else (a NaN distance in retrieval, a probe that cannot
fit) or, worse, as a checkpoint that saves NaN weights over a good one. The loops look at their loss when they
log it (no extra device sync) and before every checkpoint, so no NaN weights reach the disk.
"""
from __future__ import annotations

import math

import torch

from capcore.errors import CapawareError


def check_finite_weights(model: torch.nn.Module, where: str, fix: str) -> None:
    """Raise a one-line :class:`CapawareError` naming the first parameter that holds a NaN or inf.

    A finite loss does not prove finite weights: with bfloat16 autocast on a CPU, a 16-px crop's 1 x 1 layer4 map
    has left NaN in one conv weight after an optimiser step on 1 run in 5 (same seed, one thread; float32: 0 in 5),
    and that trunk then poisons every stage after it. Checked before a checkpoint is written, so none is saved."""
    for name, p in model.named_parameters():
        if not torch.isfinite(p).all():
            raise CapawareError(where, f"weight {name} holds NaN or inf; nothing was saved", fix)


def check_finite(loss: torch.Tensor | float, where: str, step: int, fix: str) -> None:
    """Raise a one-line :class:`CapawareError` when ``loss`` (taken at optimiser step ``step``) is NaN or inf."""
    value = float(loss.detach()) if isinstance(loss, torch.Tensor) else float(loss)
    if not math.isfinite(value):
        raise CapawareError(where, f"the loss became {value} at step {step}; nothing of this step was saved", fix)
