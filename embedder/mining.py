"""Triplet miners: which (anchor, i, j) triplets of a minibatch a loss looks at.

Conventions shared with ``embedder.losses``: a batch holds ``B`` embeddings; ``anchors`` [A] are
batch positions; per-anchor tensors are ``[A, B]`` rows (``label_dist[a, b] = D(y_anchor_a, y_b)``).
Miners return boolean masks ``[A, B, B]`` rather than index lists, so that losses stay
broadcasting code with no Python loop over triplets; ``triplets_from_mask`` gives the indices
for slow references and for counting.
"""
from __future__ import annotations

import math

import torch


def _check_rows(anchors: torch.Tensor, rows: torch.Tensor, name: str) -> None:
    if anchors.dim() != 1 or rows.dim() != 2 or rows.shape[0] != anchors.shape[0]:
        raise ValueError(f"{name} must be [A, B] for anchors [A]; got {tuple(rows.shape)} "
                         f"and anchors {tuple(anchors.shape)}")
    if anchors.numel() and (int(anchors.min()) < 0 or int(anchors.max()) >= rows.shape[1]):
        raise ValueError(f"anchors must be batch positions in [0, {rows.shape[1]})")


def not_anchor(anchors: torch.Tensor, batch_size: int) -> torch.Tensor:
    """[A, B] bool: batch member b is not anchor a itself (an anchor is never its own i or j)."""
    return torch.arange(batch_size, device=anchors.device)[None, :] != anchors[:, None]


def dense_triplet_mask(anchors: torch.Tensor, label_dist: torch.Tensor) -> torch.Tensor:
    """Dense triplet mining, Eq. 10: every pair (i, j) of non-anchors with D(y_a, y_i) < D(y_a, y_j).

    The strict ``<`` keeps one of (a, i, j) and (a, j, i), which the log-ratio loss cannot tell
    apart, and drops label-distance ties, whose order carries no supervision.
    """
    _check_rows(anchors, label_dist, "label_dist")
    other = not_anchor(anchors, label_dist.shape[1])
    closer = label_dist[:, :, None] < label_dist[:, None, :]
    return closer & other[:, :, None] & other[:, None, :]


def binary_triplet_mask(anchors: torch.Tensor, positive: torch.Tensor) -> torch.Tensor:
    """Binary mining (the paper's M(Binary)): every (positive p, negative n) pair of an anchor.

    ``positive[a, b]`` says b is among the anchor's label-nearest training items (30 in the paper);
    the trainer builds it. The anchor itself is neither positive nor negative.
    """
    _check_rows(anchors, positive, "positive")
    positive = positive.bool()
    other = not_anchor(anchors, positive.shape[1])
    pos = positive & other
    neg = ~positive & other
    return pos[:, :, None] & neg[:, None, :]


def triplets_from_mask(mask: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """(a, i, j) LongTensors of the True entries, in row-major order.

    ``a`` is a row of ``anchors``/``label_dist`` (the anchor's batch position is ``anchors[a]``),
    ``i`` and ``j`` are batch positions.
    """
    if mask.dim() != 3:
        raise ValueError(f"mask must be [A, B, B]; got {tuple(mask.shape)}")
    a, i, j = mask.nonzero(as_tuple=True)
    return a, i, j


def log_inverse_sphere_density(dist: torch.Tensor, dim: int, cutoff: float) -> torch.Tensor:
    """log 1/q(d) for pairwise distances d of points uniform on the unit sphere in ``dim`` dims.

    q(d) is proportional to d^(n-2) (1 - d^2/4)^((n-3)/2) (Wu et al. 2017, Sec. 4); in log space
    because the powers over- and underflow at n = 128. Distances below ``cutoff`` are raised to it,
    which caps the weight of near-duplicates (the paper's lambda cutoff, as in its reference code).
    """
    d = dist.clamp_min(cutoff)
    one_minus = (1.0 - 0.25 * d * d).clamp_min(torch.finfo(d.dtype).tiny)
    return -((dim - 2.0) * torch.log(d) + ((dim - 3.0) / 2.0) * torch.log(one_minus))


def distance_weighted_triplets(
    emb: torch.Tensor,
    anchors: torch.Tensor,
    positive: torch.Tensor,
    generator: torch.Generator | None = None,
    cutoff: float = 0.5,
    nonzero_loss_cutoff: float = 1.4,
) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """Distance-weighted sampling (Wu et al. 2017) with anchor-specific positives.

    For each anchor row ``a`` and each of its positives ``p`` (ascending batch position), one
    negative is drawn with probability proportional to 1/q(d(a, n)) among batch members that are
    neither the anchor nor its positives and closer than ``nonzero_loss_cutoff`` (farther ones give
    zero margin loss anyway). If no member is that close, the negative is drawn uniformly among
    all non-positives, so an anchor still yields triplets. Distances are Euclidean between
    L2-normalised embeddings, computed without gradient (sampling is not differentiated).

    Returns (a, p, n): ``a`` rows of ``anchors``, ``p`` and ``n`` batch positions. Seeding
    ``generator`` makes the draw reproducible.
    """
    _check_rows(anchors, positive, "positive")
    A, B = positive.shape
    if emb.dim() != 2 or emb.shape[0] != B:
        raise ValueError(f"emb must be [B={B}, D]; got {tuple(emb.shape)}")
    with torch.no_grad():
        f = torch.nn.functional.normalize(emb.detach(), dim=1)
        dist = (f[None, :, :] - f[anchors][:, None, :]).pow(2).sum(-1).sqrt()  # [A, B]
        other = not_anchor(anchors, B)
        pos = positive.bool().to(emb.device) & other
        cand = ~positive.bool().to(emb.device) & other
        near = cand & (dist < nonzero_loss_cutoff)

        log_w = log_inverse_sphere_density(dist, emb.shape[1], cutoff)
        log_w = log_w.masked_fill(~near, -math.inf)
        has_near = near.any(1, keepdim=True)
        # Rows with no near candidate fall back to uniform over all candidates.
        log_w = torch.where(has_near, log_w, torch.where(cand, 0.0, -math.inf))
        n_pos = pos.sum(1)
        rows = ((n_pos > 0) & cand.any(1)).nonzero(as_tuple=True)[0]
        empty = torch.empty(0, dtype=torch.long, device=emb.device)
        if rows.numel() == 0:
            return empty, empty.clone(), empty.clone()
        prob = torch.softmax(log_w[rows], dim=1)
        if generator is not None:  # the draw happens where the generator lives
            prob = prob.to(generator.device)
        draws = torch.multinomial(prob, int(n_pos[rows].max()), replacement=True,
                                  generator=generator).to(emb.device)  # [R, max positives]
        # The k-th positive of a row takes that row's k-th draw.
        pos_rows = pos[rows]
        r, p = pos_rows.nonzero(as_tuple=True)
        rank = pos_rows.long().cumsum(1)[r, p] - 1
        n = draws[r, rank]
        return rows[r], p, n
