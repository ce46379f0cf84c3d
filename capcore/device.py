"""The ``device`` and ``precision`` config keys every stage shares.

device: auto | cpu | cuda (under torchrun, cuda means this process's GPU, ``cuda:$LOCAL_RANK``).
precision: auto | float32 | bfloat16. ``auto`` is bfloat16 autocast on a GPU that supports it and
float32 elsewhere, so a CPU run gives the same numbers as before the key existed; bfloat16 needs no
loss scaling (float16 would), which is why float16 is not offered for training.
"""
from __future__ import annotations

import contextlib
import os

import torch

from capcore.errors import CapawareError

PRECISIONS = ("auto", "float32", "bfloat16")


def pick_device(name: str) -> torch.device:
    """``auto`` takes the GPU when one is visible; asking for cuda without one is a clear error."""
    if name == "auto":
        name = "cuda" if torch.cuda.is_available() else "cpu"
    if name == "cuda" and not torch.cuda.is_available():
        raise CapawareError("device", "device=cuda but no GPU is visible", "set device=cpu or device=auto")
    if name == "cuda" and int(os.environ.get("WORLD_SIZE", "1")) > 1:
        # torchrun: one GPU per process; without this every process would share GPU 0
        local = int(os.environ.get("LOCAL_RANK", "0"))
        if local >= torch.cuda.device_count():
            raise CapawareError("device", f"process {local} of torchrun has no GPU of its own "
                                f"({torch.cuda.device_count()} visible)",
                                "set --nproc_per_node to at most the number of GPUs")
        torch.cuda.set_device(local)
        return torch.device("cuda", local)
    return torch.device(name)


def pick_precision(name: str, device: torch.device, key: str = "train.precision") -> torch.dtype | None:
    """The autocast dtype of ``precision`` on ``device``; None means plain float32 (no autocast)."""
    if name not in PRECISIONS:
        raise CapawareError(key, f"unknown precision {name!r}", f"use one of {', '.join(PRECISIONS)}")
    if name == "auto":
        cuda_bf16 = device.type == "cuda" and torch.cuda.is_bf16_supported()
        return torch.bfloat16 if cuda_bf16 else None
    return torch.bfloat16 if name == "bfloat16" else None


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` to ``dtype``, or nothing when ``dtype`` is None (float32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
