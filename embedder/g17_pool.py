"""Gordo & Larlus 2017's triplet mining from a pool (§6.1, after Radenović et al. and Gordo et al.):

1. draw ``n_queries`` training images (500 in the paper) and, for each, ``per_query`` of its relevant images
   (9; relevant = its k proxy-nearest, ``embedder.proxy_ranking.knn_relevant``): the pool (5,000 images);
2. embed the pool with the current model;
3. every triplet (query, relevant, irrelevant) inside the pool, the query among the drawn queries, the relevant one
   in the query's relevant set, the irrelevant one outside it (and not the query);
4. keep the ``per_pair`` (100) largest-loss triplets of every (query, relevant) pair as candidates, from which the
   next ``refresh`` (64) updates draw their batches; then mine again.

``draw_pool`` and ``candidates`` are pure functions of their inputs (and a seeded generator), so a resumed run
re-mines the same pool; tests/embedder/test_g17.py checks that every candidate is one the rule allows and that the
kept ones are the largest.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import torch

from embedder.losses.g17 import half_hinge


@dataclass
class Pool:
    queries: np.ndarray  # [Q] training indices of the queries
    images: np.ndarray  # [P] training indices of the pool's images (the queries first), unique


def draw_pool(relevant: np.ndarray, n_queries: int, per_query: int, rng: np.random.Generator) -> Pool:
    """Queries drawn without repeats, each with ``per_query`` of its relevant images (all when it has fewer)."""
    n, k = relevant.shape
    queries = rng.choice(n, size=min(n_queries, n), replace=False)
    picks = [relevant[q, rng.choice(k, size=min(per_query, k), replace=False)] for q in queries]
    rest = np.setdiff1d(np.concatenate(picks), queries) if picks else np.empty(0, np.int64)
    return Pool(queries, np.concatenate([queries, rest]).astype(np.int64))


def candidates(emb: torch.Tensor, pool: Pool, relevant: np.ndarray, margin: float, per_pair: int) -> np.ndarray:
    """[T, 3] training indices (query, relevant, irrelevant) of the kept triplets; ``emb`` [P, D] embeds
    ``pool.images`` in order (l2-normalised here)."""
    f = torch.nn.functional.normalize(emb.float(), dim=1)
    out = []
    for qi, q in enumerate(pool.queries):
        is_rel = np.isin(pool.images, relevant[q])
        rel = np.flatnonzero(is_rel)
        rel = rel[np.argsort(pool.images[rel], kind="stable")]  # by training index
        irr = np.flatnonzero(~is_rel & (pool.images != q))  # in pool order
        if not len(rel) or not len(irr):
            continue
        h = half_hinge(f[qi], f[rel][:, None, :], f[irr][None, :, :], margin)  # [R, I]
        top = h.topk(min(per_pair, len(irr)), dim=1)
        r, k = np.nonzero(top.values.numpy() > 0)  # a satisfied triplet teaches nothing; row-major, as kept
        out.append(np.stack([np.full(len(r), q), pool.images[rel[r]], pool.images[irr[top.indices.numpy()[r, k]]]], 1))
    return np.concatenate(out).astype(np.int64) if out else np.zeros((0, 3), np.int64)

