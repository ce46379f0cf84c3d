"""Miners against brute-force triple loops, and the distance-weighted sampler's guarantees."""
from __future__ import annotations

import math

import pytest
import torch

from embedder.mining import (
    binary_triplet_mask,
    dense_triplet_mask,
    distance_weighted_triplets,
    log_inverse_sphere_density,
    triplets_from_mask,
)


def brute_dense(anchors, label_dist):
    A, B = label_dist.shape
    mask = torch.zeros(A, B, B, dtype=torch.bool)
    for a in range(A):
        for i in range(B):
            for j in range(B):
                if i != anchors[a] and j != anchors[a] and label_dist[a, i] < label_dist[a, j]:
                    mask[a, i, j] = True
    return mask


def brute_binary(anchors, positive):
    A, B = positive.shape
    mask = torch.zeros(A, B, B, dtype=torch.bool)
    for a in range(A):
        for p in range(B):
            for n in range(B):
                if p != anchors[a] and n != anchors[a] and positive[a, p] and not positive[a, n]:
                    mask[a, p, n] = True
    return mask


def test_dense_mask_matches_triple_loop_with_ties():
    g = torch.Generator().manual_seed(0)
    anchors = torch.tensor([0, 3, 3, 9])  # a repeated anchor is just another row
    label_dist = torch.randint(0, 4, (4, 12), generator=g).float()  # many ties, some zeros
    mask = dense_triplet_mask(anchors, label_dist)
    assert torch.equal(mask, brute_dense(anchors, label_dist))
    # Strict <: ties give nothing, and at most one of (a, i, j), (a, j, i) is kept.
    assert not (mask & mask.transpose(1, 2)).any()


def test_dense_mask_counts_all_pairs_when_distances_distinct():
    B = 10
    label_dist = torch.randperm(B).float()[None, :] + 1.0
    mask = dense_triplet_mask(torch.tensor([4]), label_dist)
    assert int(mask.sum()) == (B - 1) * (B - 2) // 2
    assert not mask[0, 4].any() and not mask[0, :, 4].any()


def test_binary_mask_matches_triple_loop():
    g = torch.Generator().manual_seed(1)
    anchors = torch.tensor([2, 5])
    positive = torch.rand(2, 11, generator=g) < 0.4
    positive[0, 2] = True  # the anchor flagged positive must still be excluded
    assert torch.equal(binary_triplet_mask(anchors, positive), brute_binary(anchors, positive))


def test_triplets_from_mask_roundtrip():
    label_dist = torch.tensor([[0.0, 2.0, 1.0, 1.0, 3.0]])
    mask = dense_triplet_mask(torch.tensor([0]), label_dist)
    a, i, j = triplets_from_mask(mask)
    got = sorted(zip(a.tolist(), i.tolist(), j.tolist()))
    # items 2 and 3 tie at 1.0: no triplet between them.
    assert got == [(0, 1, 4), (0, 2, 1), (0, 2, 4), (0, 3, 1), (0, 3, 4)]
    assert a.dtype == torch.long


def test_shape_errors():
    with pytest.raises(ValueError):
        dense_triplet_mask(torch.tensor([0, 1]), torch.zeros(3, 5))
    with pytest.raises(ValueError):
        dense_triplet_mask(torch.tensor([7]), torch.zeros(1, 5))


def test_log_inverse_sphere_density_matches_formula():
    dim, cutoff = 6, 0.5
    d = torch.tensor([0.1, 0.5, 0.9, 1.3, 1.9], dtype=torch.float64)
    got = log_inverse_sphere_density(d, dim, cutoff)
    for dk, gk in zip(d.tolist(), got.tolist()):
        dc = max(dk, cutoff)
        q = dc ** (dim - 2) * (1 - dc * dc / 4) ** ((dim - 3) / 2)
        assert gk == pytest.approx(-math.log(q), rel=1e-12)


def _batch(seed, B=40, D=16, A=3):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(B, D, generator=g)
    anchors = torch.tensor([0, 7, 7])[:A]
    positive = torch.rand(A, B, generator=g) < 0.3
    return emb, anchors, positive


def test_distance_weighted_never_picks_anchor_or_positive_and_pairs_every_positive():
    emb, anchors, positive = _batch(0)
    for seed in range(5):
        a, p, n = distance_weighted_triplets(emb, anchors, positive, torch.Generator().manual_seed(seed))
        assert not positive[a, n].any()
        assert not (n == anchors[a]).any() and not (p == anchors[a]).any()
        assert positive[a, p].all()
        for row in range(len(anchors)):
            expected = [b for b in range(emb.shape[0]) if positive[row, b] and b != anchors[row]]
            assert p[a == row].tolist() == expected


def test_distance_weighted_is_seeded():
    emb, anchors, positive = _batch(2)
    draws = [distance_weighted_triplets(emb, anchors, positive, torch.Generator().manual_seed(s))
             for s in (11, 11, 12)]
    assert all(torch.equal(x, y) for x, y in zip(draws[0], draws[1]))
    assert not torch.equal(draws[0][2], draws[2][2])


def _on_circle(angles):
    """Unit vectors in 3-D on a great circle; chord distance to angle 0 is 2 sin(angle / 2)."""
    t = torch.tensor(angles, dtype=torch.float64)
    return torch.stack([torch.cos(t), torch.sin(t), torch.zeros_like(t)], 1)


def test_distance_weighted_frequencies_follow_inverse_density():
    # In 3 dims q(d) is proportional to d, so P(n) is proportional to 1 / max(d, cutoff) for d < 1.4.
    neg_angles = [0.2, 0.9, 1.2, 1.5, 2.5]  # chord 0.199 (cut to 0.5), 0.870, 1.129, 1.363, 1.898 (too far)
    n_pos = 200
    emb = torch.cat([_on_circle([0.0]), _on_circle([0.05] * n_pos), _on_circle(neg_angles)])
    positive = torch.zeros(1, len(emb), dtype=torch.bool)
    positive[0, 1:1 + n_pos] = True
    gen = torch.Generator().manual_seed(0)
    counts = torch.zeros(len(emb), dtype=torch.float64)
    for _ in range(100):
        _, _, n = distance_weighted_triplets(emb, torch.tensor([0]), positive, gen)
        counts += torch.bincount(n, minlength=len(emb)).double()
    freq = counts[1 + n_pos:] / counts.sum()
    w = [1 / max(2 * math.sin(t / 2), 0.5) for t in neg_angles[:4]]
    expected = torch.tensor([x / sum(w) for x in w] + [0.0], dtype=torch.float64)
    assert freq[-1] == 0  # beyond nonzero_loss_cutoff
    assert torch.allclose(freq, expected, atol=0.01)


def test_distance_weighted_falls_back_to_uniform_when_all_negatives_far():
    emb = torch.cat([_on_circle([0.0]), _on_circle([0.01] * 50), _on_circle([2.8, 2.9, 3.0])])
    positive = torch.zeros(1, len(emb), dtype=torch.bool)
    positive[0, 1:51] = True
    _, _, n = distance_weighted_triplets(emb, torch.tensor([0]), positive, torch.Generator().manual_seed(0))
    assert set(n.tolist()) <= {51, 52, 53} and len(set(n.tolist())) > 1


def test_distance_weighted_empty_when_no_positive_or_no_negative():
    emb = torch.randn(5, 4)
    none = torch.zeros(1, 5, dtype=torch.bool)
    everyone = torch.ones(1, 5, dtype=torch.bool)
    for positive in (none, everyone):
        a, p, n = distance_weighted_triplets(emb, torch.tensor([0]), positive)
        assert a.numel() == p.numel() == n.numel() == 0
