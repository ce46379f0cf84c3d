"""The one ``device`` config key every stage shares: auto | cpu | cuda."""
from __future__ import annotations

import torch

from embedder.errors import CapawareError


def pick_device(name: str) -> torch.device:
    """``auto`` takes the GPU when one is visible; asking for cuda without one is a clear error."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise CapawareError("device", "device=cuda but no GPU is visible", "set device=cpu or device=auto")
    return torch.device(name)
