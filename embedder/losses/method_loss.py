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

    def __init__(self, method, train, seed: int, bags=None, embed_dim: int | None = None):
        super().__init__()
        self.method, self.entry = method, loss_entry(method.loss)
        self.loss = self.entry.loss_class()(method, loss_args(method), train)
        self.generator = torch.Generator().manual_seed(seed)
        text = getattr(method, "text", None)
        self.visual = 1.0 if text is None else float(text.visual)
        self.text = None
        if text is not None and (text.eq2 > 0 or text.eq3 > 0):  # Gordo & Larlus's Eq. 2 / 3 beside the row's loss
            from embedder.losses.text_side import TextSide
            if bags is None:
                raise ValueError("the text losses need the images' tf-idf caption bags (captions.space: tfidf)")
            self.text = TextSide(text, bags, embed_dim)

    @property
    def normalised(self) -> bool:
        """Whether retrieval should rank by L2-normalised embeddings, as this loss trained them."""
        return self.entry.normalised

    def forward(self, emb, anchors, label_dist, positive, items=None):
        """The row's loss x ``text.visual`` (when above 0), plus the text losses when the row has them (``items``:
        the batch members' training indices, whose caption bags they read)."""
        total = emb.sum() * 0.0
        if self.visual > 0:
            triplets = None
            if self.entry.mined:
                triplets = (dense_triplet_mask(anchors, label_dist) if self.method.mining == "dense"
                            else binary_triplet_mask(anchors, positive))
            base = self.loss(LossBatch(emb, anchors, label_dist, positive, triplets, self.generator))
            total = base if self.visual == 1.0 else self.visual * base
        if self.text is not None:
            if items is None:
                raise ValueError("the text losses need the batch's item indices")
            total = total + self.text(emb, anchors, positive, items)
        return total

    def triplets(self, emb, trip, items):
        """The row's loss on mined triplets (Gordo & Larlus's pool, embedder/g17_steps.py): Eq. 1 x ``text.visual``
        plus the text losses on the same triplets."""
        total = self.visual * self.loss.triplets(emb, trip) if self.visual > 0 else emb.sum() * 0.0
        return total + self.text.triplets(emb, trip, items) if self.text is not None else total
