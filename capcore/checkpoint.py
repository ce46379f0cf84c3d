"""Atomic, resumable training checkpoints loaded with ``weights_only=True``.

A checkpoint is a plain dict of tensors and Python scalars/strings (model and optimiser state, step,
epoch, RNG states, the config), so that ``torch.load(weights_only=True)`` can read it safely.
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

import torch

from capcore.atomic import atomic_path
from capcore.errors import CapawareError


def save_checkpoint(state: dict[str, Any], path: str | Path) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: str | Path) -> dict[str, Any]:
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "checkpoint not found", "check the path, or train stage one first")
    try:
        return torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # torch raises several types for a damaged file
        raise CapawareError(path, f"not a readable checkpoint ({type(err).__name__})",
                            "delete it and rerun the stage that writes it") from None


def file_sha256(path: str | Path, chunk: int = 1 << 20) -> str:
    """Content hash, used to tie derived files (features, tables) to the checkpoint that made them."""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        while block := handle.read(chunk):
            digest.update(block)
    return digest.hexdigest()


