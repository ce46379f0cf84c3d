"""The triplet loss (Eq. 1) and its dense-mined form (Eq. 11), on L2-normalised embeddings.

One function serves both baselines; only the mask differs: ``binary_triplet_mask`` with margin 0.2
(L(Triplet)+M(Binary)) or ``dense_triplet_mask`` with margin 0.03 (L(Triplet)+M(Dense)), where
(a, i, j) reads as (anchor, positive, negative).

Averaging: the hinge is summed over ALL mined triplets and divided by their number, inactive
(already satisfied) triplets included. That is what the authors' released code does
(``Dense_TripletLoss.py``: uniform weights ``indc / indc.sum()`` over every pair;
``Naive_TripletLoss.py``: ``Li.sum().div(N)`` over the sampled triplets). Averaging over the active
ones only would make the gradient scale jump as triplets become satisfied.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from embedder.losses.base import LossBatch, RowLoss
from embedder.losses.distance import anchor_sq_dist


def triplet_loss(emb: torch.Tensor, anchors: torch.Tensor, mask: torch.Tensor,
                 margin: float) -> torch.Tensor:
    """mean over the mask's triplets of [D(f_a,f_i) - D(f_a,f_j) + margin]_+ (D squared Euclidean).

    emb [B, D] is L2-normalised here (the paper: without it the margin becomes trivial);
    anchors [A] batch positions; mask [A, B, B] from ``embedder.mining``. Returns 0 (attached to
    ``emb``) when the mask is empty.
    """
    if emb.dim() != 2 or mask.shape != (anchors.shape[0], emb.shape[0], emb.shape[0]):
        raise ValueError(f"need emb [B, D] and mask [A, B, B]; got {tuple(emb.shape)} and "
                         f"{tuple(mask.shape)} for A={anchors.shape[0]}")
    anchors, mask = anchors.to(emb.device), mask.to(emb.device)
    f = F.normalize(emb, dim=1)
    d = anchor_sq_dist(f, anchors)  # [A, B]
    hinge = (d[:, :, None] - d[:, None, :] + margin).clamp_min(0.0)
    count = mask.sum()
    if int(count) == 0:
        return emb.sum() * 0.0
    return torch.where(mask, hinge, hinge.new_zeros(())).sum() / count.to(hinge.dtype)


class TripletLoss(RowLoss):
    """The triplet baselines: Eq. 1 on the binary-mined or Eq. 11 on the dense-mined triplets (``method.margin``)."""

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.margin = method.margin

    def forward(self, batch: LossBatch) -> torch.Tensor:
        return triplet_loss(batch.emb, batch.anchors, batch.triplets, margin=self.margin)
