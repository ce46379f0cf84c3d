"""Anchor-to-batch squared Euclidean distances, shared by the losses."""
from __future__ import annotations

import torch


def anchor_sq_dist(emb: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """[A, B] D(f_a, f_b) = ||f_a - f_b||^2, the paper's D for Eq. 1, 5 and 11.

    Summed squared differences rather than the Gram expansion ||a||^2 + ||b||^2 - 2ab: the Gram
    form cancels catastrophically for close pairs, which the log-ratio loss magnifies through
    log D and 1/D (Eq. 6), and its gradient at a coincident pair is exactly 0 instead of noise.
    """
    return (emb[None, :, :] - emb[anchors][:, None, :]).pow(2).sum(-1)
