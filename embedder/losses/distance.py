"""What the anchor-to-batch losses share: the check of their inputs and the squared Euclidean distances."""
from __future__ import annotations

import torch


def anchor_sq_dist(emb: torch.Tensor, anchors: torch.Tensor) -> torch.Tensor:
    """[A, B] D(f_a, f_b) = ||f_a - f_b||^2, the paper's D for Eq. 1, 5 and 11.

    Summed squared differences rather than the Gram expansion ||a||^2 + ||b||^2 - 2ab: the Gram
    form cancels catastrophically for close pairs, which the log-ratio loss magnifies through
    log D and 1/D (Eq. 6), and its gradient at a coincident pair is exactly 0 instead of noise.
    """
    return (emb[None, :, :] - emb[anchors][:, None, :]).pow(2).sum(-1)


def check_anchor_batch(emb: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor) -> None:
    """ValueError unless emb is [B, D] and label_dist [A, B], finite: the inputs of the log-ratio and
    Rank-N-Contrast losses (dense mining hands them each anchor's label distances to the whole batch)."""
    if emb.dim() != 2:
        raise ValueError(f"emb must be [B, D]; got {tuple(emb.shape)}")
    if label_dist.shape != (anchors.shape[0], emb.shape[0]):
        raise ValueError(f"label_dist must be [A={anchors.shape[0]}, B={emb.shape[0]}]; "
                         f"got {tuple(label_dist.shape)}")
    if not bool(torch.isfinite(label_dist).all()):
        raise ValueError("label_dist has NaN or inf entries; give every batch member a finite distance")
