"""What every stage-one loss is: a module built from its row, called on one batch.

A loss is registered in ``embedder.losses.registry`` and subclasses ``RowLoss``: its constructor reads
the row (``method``: the ``MethodConfig`` fields its entry lists), the row's own ``args``
(``registry.loss_args``) and the training settings it needs (``train``); ``forward`` takes a ``LossBatch``
and returns a scalar that is differentiable in ``batch.emb``. ``embedder.losses.method_loss.MethodLoss`` builds
the registered loss of a row and hands it each batch: it lives there, not here, because it reads the registry, whose
entries name the loss modules that import this one (issue #65: no import by string closes a cycle).
"""
from __future__ import annotations

from dataclasses import dataclass
from typing import Mapping

import torch



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
