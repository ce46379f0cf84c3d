"""Head warm-up before fine-tuning (LP-FT, Kumar et al. 2022): train the fresh embedding head alone
on the frozen pretrained trunk, then fine-tune everything.

Why: stage one starts from a pretrained trunk and a randomly initialised head. The first gradients
reach the trunk through that random head and distort the pretrained layer4 maps, which stage two then
hands to the captioners (an investigation probe on the demo saw object cells of the 7 x 7 maps fall
below background after 60 steps, and a warmed-up head keep them above). The trunk is frozen here (eval-mode BatchNorm), so
its pooled features are computed once and each warm-up step costs one linear layer.
"""
from __future__ import annotations

import numpy as np
import torch

from embedder.data import normalise


@torch.no_grad()
def pooled_features(model, bank, device, batch: int = 128) -> torch.Tensor:
    """[N, C] float32 pooled trunk features of every image of ``bank`` (eval mode)."""
    model.eval()
    out = [model.trunk(normalise(bank.uint8(np.arange(s, min(s + batch, len(bank)))), device)).float()
           for s in range(0, len(bank), batch)]
    return torch.cat(out)


def warm_up_head(model, criterion, batches, bank, steps: int, lr: float, device) -> list[float]:
    """Train ``model.head`` alone for ``steps`` steps of ``batches`` (a ``StepBatches`` whose items carry
    ``items`` indices through the sampler); return the losses. The trunk is left exactly as it was."""
    feats = pooled_features(model, bank, device)
    opt = torch.optim.Adam(model.head.parameters(), lr=lr)
    losses = []
    for n in range(steps):
        items, anchors, label_dist, positive = batches.items_of(n)
        emb = model.head(feats[torch.from_numpy(items).to(device)])
        loss = criterion(emb, anchors.to(device), label_dist.to(device), positive.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.train()
    return losses
