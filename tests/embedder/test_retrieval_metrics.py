"""Retrieval and the paper's measures: brute-force rankings, nDCG of the oracle, a hand example."""
from __future__ import annotations

import math

import numpy as np
import pytest

from embedder import retrieval
from embedder.retrieval import (
    mean_label_distance_at_k,
    ndcg_at_k,
    oracle_ranking,
    retrieve,
)


def brute_retrieve(q, x, k, exclude=None):
    out = []
    for r, qv in enumerate(q):
        d = [float(((qv - xv) ** 2).sum()) for xv in x]
        order = sorted(range(len(x)), key=lambda c: (d[c], c))
        if exclude is not None:
            order = [c for c in order if c != exclude[r]]
        out.append(order[:k])
    return np.array(out)


@pytest.mark.parametrize("chunk", [3, 64])
def test_retrieve_matches_brute_force_with_ties_and_self_exclusion(monkeypatch, chunk):
    monkeypatch.setattr(retrieval, "CHUNK_ROWS", chunk)
    rng = np.random.default_rng(0)
    x = rng.integers(0, 3, size=(40, 2)).astype(np.float32)  # small integer grid: many exact ties
    q = x[:10]
    exclude = np.arange(10)
    exclude[4] = -1
    for k in (1, 5, 39):
        assert np.array_equal(retrieve(q, x, k, exclude_self=exclude), brute_retrieve(q, x, k, exclude))
        assert np.array_equal(retrieve(q, x, k), brute_retrieve(q, x, k))
    got = retrieve(rng.normal(size=(7, 16)), x2 := rng.normal(size=(50, 16)), 50)
    assert got.dtype == np.int64 and got.shape == (7, 50)
    assert all(sorted(row) == list(range(len(x2))) for row in got.tolist())


def test_retrieve_rejects_k_too_large():
    x = np.zeros((5, 3))
    with pytest.raises(ValueError):
        retrieve(x, x, 5, exclude_self=np.arange(5))
    with pytest.raises(ValueError):
        retrieve(x, x, 0)


def test_oracle_ranking_sorts_label_distances_ties_by_index():
    d = np.array([[3.0, 1.0, 2.0, 1.0, 0.5], [np.inf, 0.0, 0.0, 7.0, 0.0]])
    assert oracle_ranking(d, 3).tolist() == [[4, 1, 3], [1, 2, 4]]


def test_ndcg_of_the_oracle_is_exactly_one():
    rng = np.random.default_rng(1)
    label_dist = rng.gamma(2.0, 3.0, size=(20, 300))
    idx = oracle_ranking(label_dist, 100)
    ideal = np.take_along_axis(label_dist, idx, 1)
    assert np.array_equal(ndcg_at_k(ideal, ideal), np.ones(100))
    # ...and any other ranking of the same database scores at most 1.
    other = np.take_along_axis(label_dist, np.argsort(rng.random((20, 300)), 1)[:, :100], 1)
    scores = ndcg_at_k(other, ideal)
    assert (scores <= 1.0).all() and (scores < 1.0).any()


def test_hand_example():
    # Query 0 retrieves label distances [1, 0, 3]; its ideal ranking is [0, 1, 3].
    # Gains 2^r = 1/(d+1): d=0 -> 1, d=1 -> 1/2, d=3 -> 1/4. Discounts log2(i+1): 1, log2 3, 2.
    #   k=1: DCG = 1/2,                    IDCG = 1                    -> 1/2
    #   k=2: DCG = 1/2 + 1/log2 3,         IDCG = 1 + (1/2)/log2 3     -> (log2 3 + 2) / (2 log2 3 + 1)
    #   k=3: DCG = 5/8 + 1/log2 3,         IDCG = 9/8 + (1/2)/log2 3   -> (5 log2 3 + 8) / (9 log2 3 + 4)
    # With log2 3 = 1.5849625: k=2 -> 3.5849625 / 4.1699250 = 0.8597187,
    #                          k=3 -> 15.9248125 / 18.2646625 = 0.8718920.
    # Query 1 retrieves [0, 2, 2] = its ideal ranking -> 1 at every k. Mean over the two queries:
    retrieved = np.array([[1, 0, 3], [0, 2, 2]])
    ideal = np.array([[0, 1, 3], [0, 2, 2]])
    l3 = math.log2(3)
    assert np.allclose(ndcg_at_k(retrieved, ideal),
                       [(0.5 + 1) / 2, ((l3 + 2) / (2 * l3 + 1) + 1) / 2, ((5 * l3 + 8) / (9 * l3 + 4) + 1) / 2],
                       rtol=1e-12)
    assert np.allclose(ndcg_at_k(retrieved, ideal), [0.75, (0.8597187 + 1) / 2, (0.8718920 + 1) / 2], atol=1e-7)
    # Mean label distance: query 0 -> 1, 1/2, 4/3; query 1 -> 0, 1, 4/3; mean 1/2, 3/4, 4/3.
    assert np.allclose(mean_label_distance_at_k(retrieved), [0.5, 0.75, 4 / 3], rtol=1e-12)
    # The ideal ranking may be given in any order.
    assert np.allclose(ndcg_at_k(retrieved, ideal[:, ::-1]), ndcg_at_k(retrieved, ideal))


def test_mean_label_distance_of_the_oracle_is_monotone_and_lowest():
    rng = np.random.default_rng(2)
    label_dist = rng.random((15, 200))
    ideal = np.take_along_axis(label_dist, oracle_ranking(label_dist, 50), 1)
    curve = mean_label_distance_at_k(ideal)
    assert (np.diff(curve) >= 0).all()
    random_rank = np.take_along_axis(label_dist, rng.permutation(200)[None, :50].repeat(15, 0), 1)
    assert (mean_label_distance_at_k(random_rank) >= curve).all()


def test_embedding_equal_to_labels_retrieves_the_oracle():
    # Label distance = Euclidean distance between label vectors; embedding = the label vector:
    # squared Euclidean retrieval is then the oracle ranking, and nDCG is 1.
    rng = np.random.default_rng(3)
    y = rng.normal(size=(120, 4))
    q, db = y[:20], y[20:]
    label_dist = np.sqrt(((q[:, None] - db[None]) ** 2).sum(-1))
    got = retrieve(q, db, 10)
    assert np.array_equal(got, oracle_ranking(label_dist, 10))
    ideal = np.take_along_axis(label_dist, oracle_ranking(label_dist, 10), 1)
    assert np.allclose(ndcg_at_k(np.take_along_axis(label_dist, got, 1), ideal), 1.0, rtol=1e-14)


def test_ndcg_rejects_negative_distances():
    with pytest.raises(ValueError):
        ndcg_at_k(np.array([[-1.0]]), np.array([[0.0]]))
