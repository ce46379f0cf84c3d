"""The learning-rate schedules of stage one (``train``) and class pretraining (``pretrain``): one function,
:func:`lr_factor`, gives the fraction of the base lr at a step for every kind, and one reader per config
section turns its settings into a step -> fraction function.

Every schedule is a function of the step alone, so a resumed run continues the schedule of an
uninterrupted one. (The captioners' schedule, ``captioners.loop.lr_at``, steps down per epoch and
warms up per step: another concept, kept with the captioners.)
"""
from __future__ import annotations

import math
from typing import Callable


KINDS = ("none", "cosine", "exponential")
"""none: the base lr throughout | cosine: a half cosine from 1 at step 0 to 0 at step ``total`` |
exponential: multiplied by ``rate`` every ``period`` steps (continuously: ``rate ** (step / period)``)."""


def lr_factor(kind: str, step: int, total: int, rate: float = 1.0, period: int | None = None) -> float:
    """The fraction of the base lr at ``step`` of ``total`` under schedule ``kind`` (``KINDS``);
    ``rate`` and ``period`` (default ``total``) shape the exponential one."""
    if kind == "none":
        return 1.0
    if kind == "cosine":
        return 0.5 * (1.0 + math.cos(math.pi * step / total))
    if kind == "exponential":
        return rate ** (step / (total if period is None else period))
    raise ValueError(f"unknown lr schedule {kind!r}; use one of {KINDS}")


def stage_one_lr(t, per_epoch: int, total: int) -> Callable[[int], float]:
    """``train``'s exponential decay: ``lr_decay`` per epoch (the paper's schedule), or down to
    ``lr_end_fraction`` at step ``total`` (a demo trains a fraction of the paper's 15 epochs; kept at 0.9
    per epoch its lr would barely decay, and its last steps would be as noisy as its first). The config
    check holds ``lr_end_fraction`` to (0, 1]."""
    if t.lr_end_fraction is None:
        rate, period = t.lr_decay, per_epoch
    else:
        rate, period = t.lr_end_fraction, total
    return lambda step: lr_factor("exponential", step, total, rate, period)  # a plain function: LambdaLR stores none


def pretrain_lr(p, total: int) -> Callable[[int], float]:
    """``pretrain.lr_decay`` (checked by the config): none (constant lr) or cosine (a half cosine down to 0 at
    step ``total``)."""
    return lambda step: lr_factor(p.lr_decay, step, total)


__all__ = ["KINDS", "lr_factor", "stage_one_lr", "pretrain_lr"]
