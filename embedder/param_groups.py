"""Per-stage learning rates (``train.layer_lr``): the optimiser's parameter groups, one per trunk stage and the head.

Why: fine-tuning a trunk whose start has learned to ignore what the new labels ask for (the colour-blind stand-in
of issue #35: colour is read at .8 after the stem and discarded by layer4) means undoing layers 2-4, while the
fresh head and the loss need no more than the rows' swept step. One multiplier per stage sets that balance; a
stage left out keeps the row's lr. The scheduler scales every group by the same factor, so the ratios hold.
"""
from __future__ import annotations

import torch

from embedder.model import Embedder


def stage_modules(model: Embedder) -> dict[str, list[torch.nn.Module]]:
    """``train.layer_lr``'s keys -> the modules they cover (the head's group also takes the loss's parameters); a
    trunk that is not a ResNet is one stage, ``trunk``."""
    if not model.resnet:
        return {"trunk": [model.trunk], "head": [model.head]}
    t = model.trunk
    return {"stem": [t.conv1, t.bn1], "layer1": [t.layer1], "layer2": [t.layer2], "layer3": [t.layer3],
            "layer4": [t.layer4], "head": [model.head]}


def param_groups(model: Embedder, criterion: torch.nn.Module, lr: float, scales: dict[str, float]) -> list[dict]:
    """Adam/SGD parameter groups: every trainable parameter once, at ``lr`` times its stage's scale (default 1).

    Frozen parameters (``train.freeze``) are left out, as the optimiser never steps them; empty groups too."""
    stages = stage_modules(model)
    stages["head"] = stages["head"] + [criterion]
    groups, seen = [], set()
    for stage, modules in stages.items():
        params = [p for m in modules for p in m.parameters() if p.requires_grad and id(p) not in seen]
        seen.update(id(p) for p in params)
        if params:
            groups.append({"params": params, "lr": lr * float(scales.get(stage, 1.0)), "name": stage})
    missing = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in seen]
    assert not missing, f"parameters in no stage: {missing}"  # a new module in Embedder must join a stage
    return groups
