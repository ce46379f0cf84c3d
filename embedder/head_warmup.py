"""Head warm-up before fine-tuning (LP-FT, Kumar et al. 2022): train the fresh embedding head alone
on the frozen pretrained trunk, then fine-tune everything (the layers ``train.freeze`` names stay frozen).

Why: stage one starts from a pretrained trunk and a randomly initialised head. The first gradients
reach the trunk through that random head and distort the pretrained layer4 maps, which stage two then
hands to the captioners (an investigation probe on the demo saw object cells of the 7 x 7 maps fall
below background after 60 steps, and a warmed-up head keep them above). The trunk is frozen here (eval-mode BatchNorm),
so its pooled features are computed once (``pooled_features``) and each warm-up step costs one linear layer.
"""
from __future__ import annotations

from typing import Callable

import numpy as np
import torch

from capcore.optim import adam


@torch.no_grad()
def pooled_features(rest: torch.nn.Module, network_input: Callable[[np.ndarray], torch.Tensor], n: int,
                    batch: int = 128) -> torch.Tensor:
    """[n, C] float32 pooled trunk features of items 0..n-1 in eval mode: ``rest`` (the trunk's trainable
    part, up to the pooled vector) over ``network_input(index)`` (normalised images, or the frozen
    prefix's cached maps, so that the prefix is not run again)."""
    rest.eval()
    out = [rest(network_input(np.arange(s, min(s + batch, n)))).float() for s in range(0, n, batch)]
    return torch.cat(out)


def warm_up_head(model, criterion, batches, feats: torch.Tensor, steps: int, lr: float, device) -> list[float]:
    """Train ``model.head`` alone for ``steps`` steps of ``batches`` (a ``StepBatches`` whose items carry
    ``items`` indices through the sampler) on the pooled trunk features ``feats``; return the losses.
    The trunk is left exactly as it was."""
    opt = adam(model.head.parameters(), fused=False, lr=lr)  # torch's default kernel, as it always was
    losses = []
    for n in range(steps):
        items, anchors, label_dist, positive = batches.items_of(n)
        emb = model.head(feats[torch.from_numpy(items).to(device)])
        loss = criterion(emb, anchors.to(device), label_dist.to(device), positive.to(device), torch.from_numpy(items))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        losses.append(loss.item())
    model.train()
    return losses
