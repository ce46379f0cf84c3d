"""Margin loss with distance-weighted sampling (Wu et al. 2017), the paper's strongest baseline.

loss = sum over sampled pairs of [margin + y (d - beta)]_+ / (number of pairs with nonzero loss)
(+ nu * beta), with d the Euclidean distance between L2-normalised embeddings, y = +1 for
(anchor, positive) and -1 for (anchor, negative), and beta a learned boundary.

Library decision (pytorch-metric-learning 2.9.0, checked in its source):
- The loss is PML's ``MarginLoss(learn_beta=True)``: it takes an ``indices_tuple`` of (a, p, n)
  batch positions with ``labels=None``, normalises embeddings, uses the unsquared Euclidean
  distance, learns beta, and divides by the number of nonzero pair losses as Wu et al.'s code does.
  It is used as is rather than rewritten. One difference from Wu et al.'s code: the nu * beta
  regulariser is added after the division, not before (irrelevant at the default nu = 0).
- The sampler is ours (``embedder.mining.distance_weighted_triplets``), not PML's
  ``DistanceWeightedMiner``: that miner derives positives from class-label equality
  (``labels[a] == labels[b]``), an equivalence relation, while our positives are each anchor's own
  label-nearest items (not symmetric, not transitive), so they cannot be written as class labels
  once a batch has more than one anchor; it makes every batch member an anchor rather than only
  ours; it draws the positives at random, with replacement, instead of pairing each positive
  with one negative; and it draws from the global RNG (``torch.randint``/``torch.multinomial`` without a
  generator), so a seeded ``torch.Generator`` could not make it reproducible.
"""
from __future__ import annotations

import torch

from embedder.losses.base import LossBatch, RowLoss
from embedder.mining import distance_weighted_triplets


class MarginLoss(torch.nn.Module):
    """Distance-weighted sampling + PML's margin loss with a learnable beta (one scalar)."""

    def __init__(self, beta_init: float = 1.2, margin: float = 0.2, nu: float = 0.0,
                 cutoff: float = 0.5, nonzero_loss_cutoff: float = 1.4):
        # imported here: pytorch_metric_learning pulls in scipy.stats (0.75 s), which every stage-one process
        # without a margin row would otherwise pay
        from pytorch_metric_learning import losses as pml_losses

        super().__init__()
        self.cutoff, self.nonzero_loss_cutoff = float(cutoff), float(nonzero_loss_cutoff)
        self.loss_fn = pml_losses.MarginLoss(margin=margin, nu=nu, beta=beta_init, learn_beta=True)

    @property
    def beta(self) -> torch.nn.Parameter:
        return self.loss_fn.beta

    def forward(self, emb: torch.Tensor, anchors: torch.Tensor, positive: torch.Tensor,
                generator: torch.Generator | None = None) -> torch.Tensor:
        """emb [B, D] (normalised inside), anchors [A], positive [A, B] bool; a seeded
        ``generator`` makes the negative sampling reproducible. 0 when nothing can be sampled."""
        a, p, n = distance_weighted_triplets(emb, anchors, positive, generator,
                                             self.cutoff, self.nonzero_loss_cutoff)
        if a.numel() == 0:
            return emb.sum() * 0.0 + self.beta.sum() * 0.0
        loss = self.loss_fn(emb, indices_tuple=(anchors.to(a.device)[a], p, n))
        return loss


class MarginRowLoss(RowLoss):
    """The Margin+DWS row: ``MarginLoss`` with alpha = ``method.margin``, sampling with the row's generator."""

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.margin_loss = MarginLoss(margin=method.margin)

    def forward(self, batch: LossBatch) -> torch.Tensor:
        return self.margin_loss(batch.emb, batch.anchors, batch.positive, generator=batch.generator)
