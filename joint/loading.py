"""A trained joint space read back for use (the self-retrieval reward, the retrieval scores of generated captions):
its weights in eval mode, frozen, and its card.

The rl stage reads a joint model it does not train: Liu et al. 2018 train the self-retrieval module first and keep
it fixed while the captioner learns from its reward (§3.2), so every parameter is frozen here, where it is loaded.
"""
from __future__ import annotations

import hashlib
import json
from pathlib import Path

import torch

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError
from joint.card import JointCard
from joint.model import JointSpace

TRAIN_FIX = ("train it first: the pipeline's joint: entry (configs/demo/demo_joint.yaml), or python -m capaware.stage "
             "joint CONFIG data.features=<set>")


def load_joint(path: str | Path, device: torch.device | str = "cpu") -> tuple[JointSpace, JointCard]:
    """(model, card) of a joint best.pt; a missing file or one of another kind is one CapawareError line."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "joint model not found", TRAIN_FIX)
    ckpt = load_checkpoint(path)
    card = JointCard.of(ckpt, path)
    if "model" not in ckpt:
        raise CapawareError(path, "joint checkpoint without weights", "pass the best.pt of the joint stage")
    model = JointSpace(**card.model_args)
    model.load_state_dict(ckpt["model"])
    model.to(device).eval().requires_grad_(False)
    return model, card


def weights_sha256(path: str | Path) -> str:
    """sha256 of what a joint model computes: its arguments and every weight (names, shapes, dtypes, values), not
    of the file, whose card records where its features lay: two copies of one model in two run folders hash alike
    (the SCST signature and fingerprint name a joint model by this)."""
    ckpt = load_checkpoint(path)
    h = hashlib.sha256(json.dumps(ckpt.get("model_args"), sort_keys=True).encode())
    for name, tensor in sorted(ckpt["model"].items()):
        t = tensor.detach().cpu().contiguous()
        h.update(f"{name}:{tuple(t.shape)}:{t.dtype}".encode())
        h.update(t.view(torch.uint8).numpy().tobytes() if t.numel() else b"")
    return h.hexdigest()
