"""The Rank-N-Contrast loss (Zha et al., "Rank-N-Contrast: Learning Continuous Representations for
Regression", NeurIPS 2023) on the anchor-to-batch label distances that the log-ratio loss takes.

Why a stage-one row: like Kim et al.'s log-ratio loss it learns from continuous labels, but it asks the
embedding only to *rank* the batch by label distance, which is what nDCG@K scores, where the log-ratio
loss fits the ratios themselves. It is the later loss the paper's claim (log-ratio + dense leads) is
tested against on every track (issue #29).

For anchor a and each other batch member j the term is

    l_aj = -log( exp(s_aj / tau) / sum_{k != a : D(y_a, y_k) >= D(y_a, y_j)} exp(s_ak / tau) ),

with s_ab = -||f_a - f_b|| (the authors' default ``l2`` feature similarity, on embeddings that are not
normalised), tau the temperature (2 in the authors' code) and D the label distance; a k tied with j in
label distance is in j's denominator (the >=). The loss is the mean of l_aj over the pairs (a, j != a):
the authors' ``RnCLoss`` averages over the n (n - 1) pairs of a batch in which every sample is an
anchor; here the anchors are those the sampler chose (``train.anchors_per_batch``), any number of them.

Exact in O(A B log B) after the O(A B D) distances, instead of the O(A B^2) of one mask per position
(the authors' loss.py): sorted by descending label distance, every denominator is a prefix of one
cumulative log-sum-exp (:func:`log_prefix_sums`), and a tie group shares the prefix that ends at its
last member.
"""
from __future__ import annotations

import math

import torch

from embedder.losses.base import LossBatch, RowLoss
from embedder.losses.distance import check_anchor_batch
from embedder.mining import not_anchor


def _check(emb: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor, temperature: float) -> None:
    check_anchor_batch(emb, anchors, label_dist)
    if not temperature > 0:
        raise ValueError(f"temperature must be > 0; got {temperature}")


def _pair_terms(logits: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor) -> torch.Tensor:
    """[A, B - 1]: l_aj = log sum_{k != a, D_ak >= D_aj} exp(logits_ak) - logits_aj for every j != a, in
    each row's order of descending label distance.

    Sorted by the key -D ascending, k enters j's denominator exactly when it sorts before j or ties with
    it, so the denominator is the cumulative log-sum-exp up to the last member of j's tie group
    (:func:`tie_group_ends`). The anchor gets the key +inf: it sorts last, enters no other member's
    denominator, and its own column is dropped.
    """
    key = (-label_dist).masked_fill(~not_anchor(anchors, logits.shape[1]), math.inf)
    key_sorted, order = torch.sort(key, dim=1)
    ordered = logits.gather(1, order)
    prefix = log_prefix_sums(ordered)
    return (prefix.gather(1, tie_group_ends(key_sorted)) - ordered)[:, :-1]


def log_prefix_sums(x: torch.Tensor) -> torch.Tensor:
    """log sum_{i <= j} exp(x_i) along each row: what ``torch.logcumsumexp`` computes, whose CPU backward
    spends most of its time on subnormal numbers (7 ms of 8 for a 150 x 150 batch on a Zen 5). Here the
    sums are of float64 exponentials shifted by the row's maximum, which cannot underflow unless a row
    spans more than 700; such a batch takes ``logcumsumexp``, in float64 as well."""
    top = x.detach().amax(dim=1, keepdim=True)
    shifted = x.double() - top.double()
    if shifted.numel() == 0 or float(shifted.detach().min()) < -700.0:
        return torch.logcumsumexp(x.double(), dim=1).to(x.dtype)
    return (shifted.exp().cumsum(dim=1).log() + top.double()).to(x.dtype)


def tie_group_ends(key_sorted: torch.Tensor) -> torch.Tensor:
    """[A, B]: for every position of each sorted row, the position of the last element equal to it.
    One reverse cumulative minimum over the positions where a tie group ends: O(B) a row, where a
    right-sided ``searchsorted`` of the row in itself costs O(B log B)."""
    width = key_sorted.shape[1]
    positions = torch.arange(width, device=key_sorted.device).expand_as(key_sorted)
    ends = torch.ones_like(key_sorted, dtype=torch.bool)
    ends[:, :-1] = key_sorted[:, 1:] != key_sorted[:, :-1]
    marked = torch.where(ends, positions, torch.full_like(positions, width))
    return marked.flip(1).cummin(1).values.flip(1)


def rank_n_contrast_loss(emb: torch.Tensor, anchors: torch.Tensor, label_dist: torch.Tensor,
                         temperature: float = 2.0) -> torch.Tensor:
    """Mean of l_aj over the pairs (a, j != a); 0 (still attached to ``emb``) if there are none.

    emb [B, D] (not normalised), anchors [A] batch positions (any number, repeats allowed), label_dist
    [A, B] = D(y_anchor, y_b) in any float dtype (sorted in its own precision, so casting creates no
    ties). The distances are exact differences (``cdist`` without the Gram expansion, which cancels
    for close pairs); their gradient at a coincident pair is 0.
    """
    _check(emb, anchors, label_dist, temperature)
    anchors, label_dist = anchors.to(emb.device), label_dist.to(emb.device)
    count = anchors.shape[0] * (emb.shape[0] - 1)  # every anchor row holds B - 1 pairs
    if count == 0:
        return emb.sum() * 0.0
    dist = torch.cdist(emb[anchors], emb, compute_mode="donot_use_mm_for_euclid_dist")
    return _pair_terms(-dist / temperature, anchors, label_dist).sum() / count


class RankNContrastLoss(RowLoss):
    """Rank-N-Contrast over every pair of the batch (``method.temperature``)."""

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.temperature = method.temperature

    def forward(self, batch: LossBatch) -> torch.Tensor:
        return rank_n_contrast_loss(batch.emb, batch.anchors, batch.label_dist, temperature=self.temperature)
