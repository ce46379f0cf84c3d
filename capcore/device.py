"""The ``device`` and ``precision`` config keys every stage shares.

device: auto | cpu | cuda (under torchrun, cuda means this process's GPU, ``cuda:$LOCAL_RANK``).
precision: auto | float32 | bfloat16. ``auto`` is bfloat16 autocast where bfloat16 arithmetic is
native (a GPU that supports it; a CPU with AVX-512 BF16 or AMX, ``capcore.cpu_isa``) and float32
elsewhere: on an AVX2 CPU, emulated bfloat16 makes a ResNet step about 12x slower than float32. So a
run's numbers depend on the kind of CPU under ``auto``; set float32 to make them not. The captioners
(XE, SCST) keep ``auto`` at float32 on every CPU: their steps are many small matrix products, measured slower
under bfloat16 autocast even with AMX (benchmarks/bench_captioner_precision.py). bfloat16 needs no
loss scaling (float16 would), which is why float16 is not offered for training.
"""
from __future__ import annotations

import contextlib
import os
import sys

import torch

from capcore.config import PRECISIONS
from capcore.cpu_isa import cpu_isa
from capcore.errors import CapawareError


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


def precision_choice(name: str, device: torch.device, key: str = "train.precision",
                     auto_on_cpu: bool = True) -> tuple[torch.dtype | None, str]:
    """The autocast dtype of ``precision`` on ``device`` (None: plain float32) and why, in words.

    An explicit ``bfloat16`` on a CPU without native bfloat16 runs as asked, with one warning line per
    key and process, since it is an order of magnitude slower than float32 there. ``auto_on_cpu=False`` keeps
    ``auto`` at float32 on every CPU: for models whose steps are many small matrix products (the captioners'
    recurrent steps), where casting to and from bfloat16 costs more than AMX saves.
    """
    if name not in PRECISIONS:
        raise CapawareError(key, f"unknown precision {name!r}", f"use one of {', '.join(PRECISIONS)}")
    if device.type == "cuda":
        native = torch.cuda.is_bf16_supported()
        where = "GPU"
    else:
        native = cpu_isa().bfloat16_native
        where = f"CPU with {cpu_isa().name}"
    if name == "float32":
        return None, f"{key}=float32 (set in the config) on a {where}"
    if name == "bfloat16":
        if device.type == "cpu" and not native:
            _warn_once(key, f"warning: {key}=bfloat16 on a {where}, which has no native bfloat16: expect "
                            f"steps about 12x slower than float32; set {key}=auto (or float32)")
        return torch.bfloat16, f"{key}=bfloat16 (set in the config) on a {where}"
    if native and device.type == "cpu" and not auto_on_cpu:
        return None, (f"{key}=auto -> float32: these small recurrent steps run faster in float32 than in bfloat16 "
                      f"autocast on a CPU, even with {cpu_isa().name} (benchmarks/bench_captioner_precision.py)")
    if native:
        return torch.bfloat16, f"{key}=auto -> bfloat16 autocast: native bfloat16 on this {where}"
    return None, f"{key}=auto -> float32: no native bfloat16 on this {where}"


def pick_precision(name: str, device: torch.device, key: str = "train.precision") -> torch.dtype | None:
    """The autocast dtype of ``precision`` on ``device``; None means plain float32 (no autocast)."""
    return precision_choice(name, device, key)[0]


_WARNED: set[str] = set()


def _warn_once(key: str, line: str) -> None:
    if key not in _WARNED:
        _WARNED.add(key)
        print(line, file=sys.stderr, flush=True)


def autocast(device: torch.device, dtype: torch.dtype | None):
    """``torch.autocast`` to ``dtype``, or nothing when ``dtype`` is None (float32)."""
    if dtype is None:
        return contextlib.nullcontext()
    return torch.autocast(device.type, dtype=dtype)
