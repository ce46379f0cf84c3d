"""What every stage-one loss is: a module built from its row, called on one batch.

A loss is registered in ``embedder.losses.registry`` and subclasses ``RowLoss``: its constructor reads
the row (``method``: the ``MethodConfig`` fields its entry lists), the row's own ``args``
(``registry.loss_args``) and the training settings it needs (``train``); ``forward`` takes a ``LossBatch``
and returns a scalar that is differentiable in ``batch.emb``. ``MethodLoss`` builds the registered
loss of a row and hands it each batch.
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch

from embedder.losses.registry import loss_args, loss_entry
from embedder.mining import binary_triplet_mask, dense_triplet_mask


@dataclass
class LossBatch:
    """One step's batch as a loss sees it (A anchors among B batch members)."""
    emb: torch.Tensor  # [B, D] float32 embeddings, raw (a normalised loss normalises them itself)
    anchors: torch.Tensor  # [A] batch positions of the anchors
    label_dist: torch.Tensor  # [A, B] label distance of each anchor to every batch member
    positive: torch.Tensor  # [A, B] bool: the anchor's label-nearest training items (binary supervision)
    triplets: torch.Tensor | None  # [A, B, B] bool, the mined (anchor, i, j) of ``method.mining``; None unless mined
    generator: torch.Generator  # the row's seeded generator, for losses that sample


class RowLoss(torch.nn.Module):
    """Base class of a registered stage-one loss."""

    def __init__(self, method, args: Mapping[str, float], train):
        super().__init__()

    def forward(self, batch: LossBatch) -> torch.Tensor:
        raise NotImplementedError


class MethodLoss(torch.nn.Module):
    """A row's loss: its registered ``RowLoss``, fed each batch with the triplets its mining picks."""

    def __init__(self, method, train, seed: int):
        super().__init__()
        self.method, self.entry = method, loss_entry(method.loss)
        self.loss = self.entry.loss_class()(method, loss_args(method), train)
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def normalised(self) -> bool:
        """Whether retrieval should rank by L2-normalised embeddings, as this loss trained them."""
        return self.entry.normalised

    def forward(self, emb, anchors, label_dist, positive):
        triplets = None
        if self.entry.mined:
            triplets = (dense_triplet_mask(anchors, label_dist) if self.method.mining == "dense"
                        else binary_triplet_mask(anchors, positive))
        return self.loss(LossBatch(emb, anchors, label_dist, positive, triplets, self.generator))
