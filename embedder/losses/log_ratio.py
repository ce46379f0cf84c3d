"""The log-ratio loss (Kim et al. 2019, Eq. 5) over densely mined triplets.

For anchor a and a triplet (a, i, j) the loss is {log D(f_a,f_i)/D(f_a,f_j) - log D(y_a,y_i)/D(y_a,y_j)}^2
with D the squared Euclidean distance in embedding space (as the paper says; the authors' released
``LogRatioLoss.py`` uses the unsquared distance, which halves the embedding log-ratio) and
D(y_a, y) the label distance. Writing u_b = log(D(f_a,f_b)+eps) - log(D(y_a,y_b)+eps), every
triplet term is (u_i - u_j)^2, so the loss depends on the batch only through the vector u.

Averaging: the sum over all mined triplets of all anchors divided by their number, i.e. every
triplet weighs the same (the reference code's ``wgt = indc / indc.sum()``). The ``eps`` inside both
logs is the reference code's as well; it keeps coincident embeddings and zero label distances finite.
"""
from __future__ import annotations

import math

import torch

from embedder.losses.base import LossBatch, RowLoss
from embedder.losses.distance import anchor_sq_dist, check_anchor_batch
from embedder.mining import dense_triplet_mask, not_anchor, triplets_from_mask


def _log_residual(emb: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor,
                  eps: float, squared: bool = True) -> torch.Tensor:
    """u [A, B] = log(D(f_a, f_b) + eps) - log(D(y_a, y_b) + eps).

    ``squared`` False: D(f) is the unsquared distance, log D = 1/2 log(||f_a - f_b||^2 + eps^2),
    which equals log(eps) at a coincident pair like the squared form and, unlike log(sqrt(.)), has
    a finite gradient there (the anchor's own column included)."""
    d_emb = anchor_sq_dist(emb, anchors)
    log_d = torch.log(d_emb + eps) if squared else 0.5 * torch.log(d_emb + eps * eps)
    return log_d - torch.log(label_dist.to(d_emb.dtype) + eps)


def _dense_pair_sum(u: torch.Tensor, anchors: torch.Tensor,
                    label_dist: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """Sum of (u_i - u_j)^2 over the dense triplets (Eq. 10) in O(A B log B), and their number.

    Expanding the square: sum_{y_i<y_j} u_i^2 + u_j^2 - 2 u_i u_j
      = sum_b u_b^2 (n_less_b + n_greater_b) - 2 sum_b u_b S_b,
    where n_less_b / n_greater_b count items with strictly smaller / larger label distance and
    S_b sums u over the strictly smaller ones. Strictness is what the mask does with ties: a tie
    group contributes neither to its own counts nor to its own S. The anchor is moved past every
    item (label distance +inf) and given u = 0, so it is never counted as i or j.
    """
    A, B = u.shape
    is_anchor = ~not_anchor(anchors, B)
    # The loss is invariant to a per-anchor shift of u; centring shrinks the terms that cancel in
    # the expansion (at convergence all u are close to one constant). Detached: the shift is a
    # constant of the function, so the gradient is unchanged.
    centre = (u.masked_fill(is_anchor, 0.0).sum(1, keepdim=True) / max(B - 1, 1)).detach()
    u = (u - centre).masked_fill(is_anchor, 0.0)
    y = label_dist.masked_fill(is_anchor, math.inf).contiguous()
    y_sorted, order = torch.sort(y, dim=1)
    n_less = torch.searchsorted(y_sorted, y, right=False)  # strictly smaller (anchor is last)
    n_greater = (B - 1) - torch.searchsorted(y_sorted, y, right=True)  # strictly larger, anchor excluded
    n_less = n_less.masked_fill(is_anchor, 0)
    n_greater = n_greater.masked_fill(is_anchor, 0)
    prefix = torch.cat([u.new_zeros(A, 1), torch.cumsum(u.gather(1, order), dim=1)], dim=1)
    s_less = prefix.gather(1, n_less)
    total = (u * u * (n_less + n_greater).to(u.dtype)).sum() - 2.0 * (u * s_less).sum()
    return total, n_greater.sum()


def log_ratio_loss(emb: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor,
                   mask: torch.Tensor | None = None, eps: float = 1e-6, squared: bool = True) -> torch.Tensor:
    """Eq. 5 averaged over the mined triplets; 0 (still attached to ``emb``) if there are none.

    emb [B, D] (not normalised: the loss is scale-free), anchors [A] batch positions, label_dist
    [A, B] = D(y_anchor, y_b). With ``mask`` None the dense triplets of Eq. 10 are used through an
    exact O(A B log B) closed form; a given ``mask`` [A, B, B] (any miner) is applied by broadcasting
    [A, B, B]. The gradient is Eq. 6-9 (with D + eps in the denominators). ``squared`` False uses the
    unsquared embedding distance of the authors' released code instead of the paper's squared one.
    """
    check_anchor_batch(emb, anchors, label_dist)
    anchors, label_dist = anchors.to(emb.device), label_dist.to(emb.device)
    u = _log_residual(emb, anchors, label_dist, eps, squared)
    if mask is None:
        total, count = _dense_pair_sum(u, anchors, label_dist)
    else:
        if mask.shape != (u.shape[0], u.shape[1], u.shape[1]):
            raise ValueError(f"mask must be [A, B, B] = {(u.shape[0], u.shape[1], u.shape[1])}; "
                             f"got {tuple(mask.shape)}")
        diff = u[:, :, None] - u[:, None, :]
        total = torch.where(mask.to(u.device), diff * diff, diff.new_zeros(())).sum()
        count = mask.sum()
    if int(count) == 0:
        return emb.sum() * 0.0
    return total / count.to(total.dtype)


def log_ratio_loss_per_triplet(emb: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor,
                               mask: torch.Tensor | None = None, eps: float = 1e-6,
                               squared: bool = True) -> torch.Tensor:
    """Slow, literal Eq. 5: one Python iteration per triplet. For tests and benchmarks only."""
    if mask is None:
        mask = dense_triplet_mask(anchors, label_dist)
    a_rows, i_idx, j_idx = triplets_from_mask(mask)
    terms = []
    for a, i, j in zip(a_rows.tolist(), i_idx.tolist(), j_idx.tolist()):
        f_a, f_i, f_j = emb[int(anchors[a])], emb[i], emb[j]
        d_i = ((f_i - f_a) ** 2).sum() if squared else torch.linalg.vector_norm(f_i - f_a)
        d_j = ((f_j - f_a) ** 2).sum() if squared else torch.linalg.vector_norm(f_j - f_a)
        y_i, y_j = label_dist[a, i], label_dist[a, j]
        terms.append((torch.log((d_i + eps) / (d_j + eps)) - torch.log((y_i + eps) / (y_j + eps))) ** 2)
    if not terms:
        return emb.sum() * 0.0
    return torch.stack(terms).mean()


class LogRatioLoss(RowLoss):
    """The paper's row: Eq. 5 over every dense triplet of the batch (``method.distance``: squared, as in the
    paper, or euclidean, as in the authors' code; ``train.log_ratio_eps`` guards the logarithms)."""

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.eps, self.squared = train.log_ratio_eps, method.distance == "squared"

    def forward(self, batch: LossBatch) -> torch.Tensor:
        return log_ratio_loss(batch.emb, batch.anchors, batch.label_dist, eps=self.eps, squared=self.squared)
