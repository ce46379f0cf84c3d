"""Gordo & Larlus 2017's hinge on dot products (§5, Eq. 1-3), and their visual loss as a stage-one row.

``half_hinge(q, p, n, m) = ½·max(0, m − qᵀp + qᵀn)`` is all three equations: Eq. 1 with image embeddings on every
side (φq, φ+, φ−), Eq. 2 with the query image against the texts (φq, θ+, θ−), Eq. 3 with the query text against the
images (θq, φ+, φ−). Embeddings are l2-normalised (R-MAC's output and θ(t) = Wᵀt/‖Wᵀt‖ both are).

``G17Loss``, the row: in a batch, the triplets are (anchor, relevant, irrelevant), "relevant" being the anchor's
k nearest training images by the caption proxy (the batch's ``positive`` mask: ``train.positives`` = k, 32 in the
paper), and, as their mining keeps "the 100 triplets with the largest loss for every query and positive pair", each
(anchor, relevant) pair keeps its ``per_pair`` hardest irrelevant images; the loss is the mean over the kept ones.
Their pool mining across the training set (500 queries x 9 relevant, re-mined every 64 updates) is
``embedder.g17_pool``.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from embedder.losses.base import LossBatch, RowLoss


def half_hinge(q: torch.Tensor, pos: torch.Tensor, neg: torch.Tensor, margin: float) -> torch.Tensor:
    """[...]: ½·max(0, m − qᵀp + qᵀn) over the last dimension (Eq. 1, 2 or 3 by which vectors are passed)."""
    return 0.5 * (margin - (q * pos).sum(-1) + (q * neg).sum(-1)).clamp_min(0.0)


def pair_hinges(queries: torch.Tensor, keys: torch.Tensor, anchors: torch.Tensor, positive: torch.Tensor,
                margin: float, per_pair: int) -> torch.Tensor:
    """The kept hinges of a batch, flat: for each anchor a (its query vector ``queries[a]``) and relevant batch
    member i (positive[a, i], i != anchors[a]), the ``per_pair`` largest ½·max(0, m − q_a·k_i + q_a·k_j) over the
    irrelevant j (not positive, j != anchors[a]); ``keys`` [B, D] the members' vectors. Eq. 1: queries and keys the
    images' embeddings; Eq. 2: keys the texts'; Eq. 3: queries the anchors' texts."""
    sim = queries @ keys.t()  # [A, B]
    rows = torch.arange(len(anchors), device=keys.device)
    own = torch.zeros_like(positive, dtype=torch.bool)
    own[rows, anchors] = True
    rel, irr = positive & ~own, ~positive & ~own
    h = 0.5 * (margin - sim[:, :, None] + sim[:, None, :]).clamp_min(0.0)  # [A, i, j]
    h = h.masked_fill(~irr[:, None, :], -1.0)  # irrelevant j only (-1: never kept, below any hinge)
    top = h.topk(min(per_pair, h.shape[2]), dim=2).values  # [A, B, k]
    return top[rel[:, :, None] & (top >= 0)]


def batch_hinges(emb: torch.Tensor, anchors: torch.Tensor, positive: torch.Tensor, margin: float,
                 per_pair: int) -> torch.Tensor:
    """Eq. 1's kept hinges on the batch's (normalised) image embeddings."""
    f = F.normalize(emb, dim=1)
    return pair_hinges(f[anchors], f, anchors, positive, margin, per_pair)


class MinedTriplets(torch.nn.Module):
    """The current candidates as a buffer of the row's criterion, so a checkpoint keeps them and a run resumed
    between two minings draws from the same ones (their number changes from one mining to the next: a load takes
    the stored size)."""

    def __init__(self):
        super().__init__()
        self.register_buffer("triplets", torch.zeros(0, 3, dtype=torch.long))

    def _load_from_state_dict(self, state_dict, prefix, *args, **kwargs):
        stored = state_dict.get(prefix + "triplets")
        if stored is not None:
            self.triplets = torch.zeros_like(stored)
        super()._load_from_state_dict(state_dict, prefix, *args, **kwargs)


class G17Loss(RowLoss):
    """Eq. 1 on the batch's k-NN triplets, each relevant pair's hardest ``per_pair`` irrelevant images kept."""

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.margin, self.per_pair = method.margin, int(args["per_pair"])
        if getattr(train, "sampler", "anchors") == "g17_pool":  # their pool mining (embedder/g17_steps.py)
            self.mined = MinedTriplets()

    def triplets(self, emb: torch.Tensor, trip: torch.Tensor) -> torch.Tensor:
        """Eq. 1 on given triplets: ``trip`` [T, 3] rows of ``emb`` (query, relevant, irrelevant), the mean."""
        f = F.normalize(emb, dim=1)
        return half_hinge(f[trip[:, 0]], f[trip[:, 1]], f[trip[:, 2]], self.margin).mean()

    def forward(self, batch: LossBatch) -> torch.Tensor:
        kept = batch_hinges(batch.emb, batch.anchors.to(batch.emb.device), batch.positive.to(batch.emb.device),
                            self.margin, self.per_pair)
        return kept.mean() if kept.numel() else batch.emb.sum() * 0.0
