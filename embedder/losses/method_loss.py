"""A row's loss as stage one trains it: the ``RowLoss`` its ``method.loss`` names in ``embedder.losses.registry``,
fed each batch with the triplets its mining picks. Apart from ``embedder.losses.base`` because it reads the
registry, and the registry's entries name the loss modules, which import ``base``."""
from __future__ import annotations

import torch

from embedder.losses.base import LossBatch
from embedder.losses.registry import loss_args, loss_entry
from embedder.mining import binary_triplet_mask, dense_triplet_mask


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
