"""Retrieval and the paper's retrieval measures (Sec. 4.1), in numpy.

- ``retrieve``: top-K database items per query by squared Euclidean embedding distance.
- ``oracle_ranking``: top-K by label distance (the Oracle row; its nDCG is 1 by construction).
- ``mean_label_distance_at_k``: mean over queries of the mean label distance of the top-k.
- ``ndcg_at_k``: the modified nDCG of Eq. 12 with relevance r = -log2(d + 1), so the gain
  2^r = 1 / (d + 1), discount log2(i + 1), normalised per query by the same sum over the ideal
  ranking (the query's K smallest label distances in the database).

Both measures return the whole curve k = 1..K, as the authors' evaluation code computes them.
Ties are broken by database index everywhere, so rankings are reproducible.
"""
from __future__ import annotations

import numpy as np

# Rows of queries scored at once: keeps the [rows, N] distance block small (64 x 100k float64 = 51 MB).
CHUNK_ROWS = 64


def _topk_smallest(d: np.ndarray, k: int) -> np.ndarray:
    """[R, k] column indices of the k smallest entries of each row, ascending, ties by index."""
    if k == d.shape[1]:
        return np.argsort(d, axis=1, kind="stable")
    cand = np.argpartition(d, k - 1, axis=1)[:, :k]
    kth = np.take_along_axis(d, cand, axis=1).max(axis=1)
    # argpartition picks arbitrarily among entries tied with the k-th value; those rows are redone
    # with a full stable sort (rare with real-valued distances).
    tied = (d <= kth[:, None]).sum(axis=1) > k
    cand.sort(axis=1)  # ascending index, so the stable sort below breaks ties by index
    order = np.argsort(np.take_along_axis(d, cand, axis=1), axis=1, kind="stable")
    out = np.take_along_axis(cand, order, axis=1)
    if tied.any():
        out[tied] = np.argsort(d[tied], axis=1, kind="stable")[:, :k]
    return out


def _check_exclude(exclude_self, n_query: int, n_db: int) -> np.ndarray | None:
    if exclude_self is None:
        return None
    ex = np.asarray(exclude_self, dtype=np.int64)
    if ex.shape != (n_query,) or (ex >= n_db).any():
        raise ValueError(f"exclude_self must be [Q={n_query}] database indices (< {n_db}, or -1 for "
                         f"none); got shape {ex.shape}")
    return ex


def retrieve(query_emb: np.ndarray, db_emb: np.ndarray, k: int,
             exclude_self: np.ndarray | None = None) -> np.ndarray:
    """[Q, k] int64 database indices, nearest first by squared Euclidean distance.

    ``exclude_self`` [Q]: the database index of each query's own item (or -1), never returned, for
    when the queries are part of the database. Distances are ||x||^2 - 2 q.x in float64 (the
    query norm does not change the order), computed CHUNK_ROWS queries at a time.
    """
    q = np.asarray(query_emb, dtype=np.float64)
    x = np.asarray(db_emb, dtype=np.float64)
    if q.ndim != 2 or x.ndim != 2 or q.shape[1] != x.shape[1]:
        raise ValueError(f"need query [Q, D] and database [N, D]; got {q.shape} and {x.shape}")
    ex = _check_exclude(exclude_self, len(q), len(x))
    n_avail = len(x) - (1 if ex is not None and (ex >= 0).any() else 0)
    if not 1 <= k <= n_avail:
        raise ValueError(f"k={k} must be in [1, {n_avail}] for a database of {len(x)} items")
    x_sq = (x * x).sum(axis=1)
    out = np.empty((len(q), k), dtype=np.int64)
    for start in range(0, len(q), CHUNK_ROWS):
        stop = min(start + CHUNK_ROWS, len(q))
        d = x_sq[None, :] - 2.0 * (q[start:stop] @ x.T)
        if ex is not None:
            rows = np.nonzero(ex[start:stop] >= 0)[0]
            d[rows, ex[start:stop][rows]] = np.inf
        out[start:stop] = _topk_smallest(d, k)
    return out


def oracle_ranking(label_dist: np.ndarray, k: int) -> np.ndarray:
    """[Q, k] database indices with the k smallest label distances per query, ties by index.

    ``label_dist`` [Q, N] query-to-database label distances; to exclude a query's own item, set
    its entry to +inf first. ``np.take_along_axis(label_dist, idx, 1)`` gives ``ndcg_at_k``'s
    ``dist_ideal``.
    """
    d = np.asarray(label_dist, dtype=np.float64)
    if d.ndim != 2 or not 1 <= k <= d.shape[1]:
        raise ValueError(f"need label_dist [Q, N] and 1 <= k <= N; got {d.shape}, k={k}")
    out = np.empty((len(d), k), dtype=np.int64)
    for start in range(0, len(d), CHUNK_ROWS):
        out[start:start + CHUNK_ROWS] = _topk_smallest(d[start:start + CHUNK_ROWS], k)
    return out


def mean_label_distance_at_k(dist_retrieved: np.ndarray) -> np.ndarray:
    """[K]: entry k-1 = mean over queries of the mean label distance of the top-k retrievals."""
    d = np.asarray(dist_retrieved, dtype=np.float64)
    if d.ndim != 2:
        raise ValueError(f"dist_retrieved must be [Q, K]; got {d.shape}")
    return (np.cumsum(d, axis=1) / np.arange(1, d.shape[1] + 1)).mean(axis=0)


def _dcg(dist: np.ndarray) -> np.ndarray:
    """[Q, K] cumulative DCG with gain 2^(-log2(d+1)) = 1/(d+1) and discount log2(i+1)."""
    gain = 1.0 / (dist + 1.0)
    discount = np.log2(np.arange(1, dist.shape[1] + 1) + 1.0)
    return np.cumsum(gain / discount, axis=1)


def ndcg_at_k(dist_retrieved: np.ndarray, dist_ideal: np.ndarray) -> np.ndarray:
    """[K]: the modified nDCG_k of Eq. 12 for k = 1..K, averaged over queries.

    dist_retrieved [Q, K]: label distances of the retrieved items in rank order; dist_ideal [Q, K]:
    the query's K smallest label distances over the database (sorted here, so any order works).
    Label distances must be >= 0 (the relevance is -log2(d + 1)).
    """
    got = np.asarray(dist_retrieved, dtype=np.float64)
    ideal = np.sort(np.asarray(dist_ideal, dtype=np.float64), axis=1)
    if got.ndim != 2 or got.shape != ideal.shape:
        raise ValueError(f"dist_retrieved and dist_ideal must both be [Q, K]; got {got.shape} "
                         f"and {ideal.shape}")
    if (got < 0).any() or (ideal < 0).any() or not (np.isfinite(got).all() and np.isfinite(ideal).all()):
        raise ValueError("label distances must be finite and >= 0")
    return (_dcg(got) / _dcg(ideal)).mean(axis=0)
