"""VSE0 and VSE++ as modules: ``loss(img_emb, txt_emb) -> scalar``, both directions summed over the batch.

The sum (not the mean) is vsepp's reduction, and the one Liu et al.'s retrieval module was trained with: the
learning rate that goes with it is vsepp's (2e-4). ``per_item`` gives the same loss unreduced, one value per positive
pair (its image -> text plus its text -> image term), for a caller that weighs or records items.
"""
from __future__ import annotations

import torch
from torch import nn

from joint.losses import hinges


class VSELoss(nn.Module):
    """The hinge loss of a batch of positive pairs, every negative (VSE0) or the hardest (``hardest``, VSE++)."""

    def __init__(self, margin: float = 0.2, hardest: bool = True):
        super().__init__()
        self.margin, self.hardest = float(margin), hardest

    def uses_hardest(self) -> bool:
        return self.hardest

    def per_item(self, img: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
        """[B]: pair i's image -> text term plus its text -> image term."""
        i2t, t2i = hinges.per_item(img, txt, self.margin, self.uses_hardest())
        return i2t + t2i

    def forward(self, img: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
        return self.per_item(img, txt).sum()


class VSE0(VSELoss):
    """Every hinge of the batch, both directions (Liu et al. 2018, Table 3's VSE0 row)."""

    def __init__(self, margin: float = 0.2):
        super().__init__(margin, hardest=False)


class VSEPlusPlus(VSELoss):
    """The hardest negative in the batch, both directions (Faghri et al.'s VSE++, ``max_violation``)."""

    def __init__(self, margin: float = 0.2):
        super().__init__(margin, hardest=True)
