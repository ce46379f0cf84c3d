"""What a frozen trunk computes over an image bank, computed once per study process.

A study trains its rows one after another in one process, and every row of the caption track starts
from the same class-pretrained trunk: each computed the frozen prefix's maps (``train.freeze``) and the
pooled features of its head warm-up over the same 1,200 images again. Here each result is kept under a
digest of the weights that made it, so a later row reuses it exactly when its weights are the same
(and recomputes it when they are not: another init, another seed, a row that trained the prefix).
One entry per kind is kept: a study's rows are sequential, so older entries are never asked for again.
"""
from __future__ import annotations

import hashlib
from typing import Callable

import torch

_LATEST: dict[str, tuple[tuple, torch.Tensor, object]] = {}


def weights_digest(module: torch.nn.Module) -> str:
    """sha256 over a module's parameters and buffers (names, shapes, dtypes and bytes)."""
    digest = hashlib.sha256()
    for name, tensor in module.state_dict().items():
        t = tensor.detach().cpu().contiguous().reshape(-1)  # 1-D: a 0-d buffer (num_batches_tracked) too
        digest.update(f"{name}:{tuple(tensor.shape)}:{t.dtype}".encode())
        digest.update(t.view(torch.uint8).numpy().tobytes())
    return digest.hexdigest()


def computed_once(kind: str, module: torch.nn.Module, bank, extra: tuple,
                  compute: Callable[[], torch.Tensor]) -> torch.Tensor:
    """``compute()``, or the tensor it gave last time for the same ``kind``, weights, bank and ``extra``.
    The entry holds the bank itself, so no other bank can be given its ``id`` while the entry lives."""
    key = (weights_digest(module), id(bank), len(bank), extra)
    held = _LATEST.get(kind)
    if held is not None and held[0] == key:
        return held[1]
    value = compute()
    _LATEST[kind] = (key, value, bank)
    return value


def forget() -> None:
    """Drop every held result (tests; a long-lived process that is done with a study)."""
    _LATEST.clear()
