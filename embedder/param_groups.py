"""Per-stage learning rates (``train.layer_lr``): the optimiser's parameter groups, one per trunk stage and the head.

Why: fine-tuning a trunk whose start has learned to ignore what the new labels ask for (the colour-blind stand-in of
issue #35: colour is read at .8 after the stem and discarded by layer4) means undoing layers 2-4, while the fresh head
and the loss need no more than the rows' swept step. One multiplier per stage sets that balance; a stage left out
keeps the row's lr. The stages are the backbone's own (``Embedder.stage_parameters``). The scheduler scales every
group by the same factor, so the ratios hold.
"""
from __future__ import annotations

import torch

from embedder.model import Embedder


def param_groups(model: Embedder, criterion: torch.nn.Module, lr: float, scales: dict[str, float]) -> list[dict]:
    """Adam/SGD parameter groups: every trainable parameter once, at ``lr`` times its stage's scale (default 1).

    Frozen parameters (``train.freeze``) are left out, as the optimiser never steps them; empty groups too."""
    stages = model.stage_parameters()
    stages["head"] = stages["head"] + list(criterion.parameters())
    groups, seen = [], set()
    for stage, stage_params in stages.items():
        params = [p for p in stage_params if p.requires_grad and id(p) not in seen]
        seen.update(id(p) for p in params)
        if params:
            groups.append({"params": params, "lr": lr * float(scales.get(stage, 1.0)), "name": stage})
    missing = [n for n, p in model.named_parameters() if p.requires_grad and id(p) not in seen]
    assert not missing, f"parameters in no stage: {missing}"  # a new module in Embedder must join a stage
    return groups
