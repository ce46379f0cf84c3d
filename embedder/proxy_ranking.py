"""Gordo & Larlus 2017's ranking metrics against a relevance proxy, and their k-NN relevance (issue #67).

Their evaluation (§6, Table 2, Fig. 2): 1k query images of a split rank every image of the split (the query
removed) by visual similarity; the proxy relevance of a retrieved image is the dot product of its caption tf-idf
with the query's. After the top R results:

- **NDCG@R**: DCG of the proxy relevances in the visual order, gain = relevance, discount log2(rank + 1), over the
  DCG of the R most relevant images (scikit-learn's ``ndcg_score`` with linear gains is the same number; the test
  checks it);
- **PCC@R**: Pearson's correlation between the visual scores and the proxy relevances of those R images;
- **AUC**: the area under each curve over R, divided by the range of R (so in the metric's own units).

Training relevance is a hard cut (§5.1): an image's ``k`` nearest neighbours by the proxy (k = 32 in the paper)
are relevant, every other image is not. ``knn_relevant`` computes them in row blocks, so a COCO-sized split never
holds an N x N matrix.

Hand-written over NumPy because the curves need every R at once for every query (one sort, cumulative sums);
``sklearn.metrics.ndcg_score`` gives one R per call and ``scipy.stats.pearsonr`` one query per call, and the tests
use both as the independent computation.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


def knn_relevant(vectors, k: int, block: int = 1024) -> np.ndarray:
    """[N, k] indices of each row's ``k`` most similar other rows by dot product (the row itself excluded), the most
    similar first; ties go to the lower index. ``vectors``: [N, V] (dense or scipy sparse) l2-normalised rows."""
    n = vectors.shape[0]
    if not 0 < k < n:
        raise ValueError(f"k = {k} needs 0 < k < {n} images")
    out = np.empty((n, k), dtype=np.int64)
    for start in range(0, n, block):
        stop = min(n, start + block)
        sim = vectors[start:stop] @ vectors.T
        sim = np.asarray(sim.todense() if hasattr(sim, "todense") else sim, dtype=np.float64)
        sim[np.arange(stop - start), np.arange(start, stop)] = -np.inf  # not its own neighbour
        order = np.argsort(-sim, axis=1, kind="stable")[:, :k]
        out[start:stop] = order
    return out


@dataclass
class ProxyCurves:
    """NDCG@R and PCC@R for R = 1..r_max, averaged over the queries (PCC@1 is undefined: NaN), and their AUCs."""
    ndcg: np.ndarray
    pcc: np.ndarray

    @property
    def ndcg_auc(self) -> float:
        return area(self.ndcg, start=1)

    @property
    def pcc_auc(self) -> float:
        return area(self.pcc, start=2)


def area(curve: np.ndarray, start: int) -> float:
    """Trapezoidal area under ``curve`` (entry r - 1 is R = r) from R = ``start`` to its end, over that range."""
    y = np.asarray(curve[start - 1:], dtype=np.float64)
    if len(y) < 2:
        raise ValueError("an area needs two or more values of R")
    return float(np.trapezoid(y) / (len(y) - 1))


def proxy_curves(scores: np.ndarray, relevance: np.ndarray, r_max: int,
                 exclude: np.ndarray | None = None) -> ProxyCurves:
    """The curves of Q queries: ``scores`` [Q, N] visual similarity to every gallery image, ``relevance`` [Q, N]
    the proxy's; ``exclude`` [Q] the gallery index of each query itself (removed from its results), or None."""
    s, rel = np.asarray(scores, dtype=np.float64).copy(), np.asarray(relevance, dtype=np.float64).copy()
    if s.shape != rel.shape or s.ndim != 2:
        raise ValueError(f"scores and relevance must both be [Q, N]; got {s.shape} and {rel.shape}")
    rows = np.arange(len(s))
    if exclude is not None:
        s[rows, exclude], rel[rows, exclude] = -np.inf, -np.inf
    if not 1 <= r_max < s.shape[1] - (exclude is not None):
        raise ValueError(f"r_max = {r_max} needs 1 <= r_max < the gallery")
    order = np.argsort(-s, axis=1, kind="stable")[:, :r_max]
    got = np.take_along_axis(rel, order, 1)  # [Q, R] proxy relevance in the visual order
    ideal = -np.sort(-rel, axis=1)[:, :r_max]  # the R most relevant
    discount = np.log2(np.arange(2, r_max + 2))
    dcg, idcg = np.cumsum(got / discount, 1), np.cumsum(ideal / discount, 1)
    ndcg = np.divide(dcg, idcg, out=np.zeros_like(dcg), where=idcg > 0)
    return ProxyCurves(ndcg.mean(0), _running_pearson(np.take_along_axis(s, order, 1), got).mean(0))


def _running_pearson(x: np.ndarray, y: np.ndarray) -> np.ndarray:
    """[Q, R]: Pearson's r of the first R values of each row pair, R = 1..; NaN at R = 1, 0 where one side is
    constant (no ranking information: no correlation)."""
    n = np.arange(1, x.shape[1] + 1, dtype=np.float64)
    sx, sy = np.cumsum(x, 1), np.cumsum(y, 1)
    sxx, syy, sxy = np.cumsum(x * x, 1), np.cumsum(y * y, 1), np.cumsum(x * y, 1)
    cov = sxy - sx * sy / n
    vx, vy = np.maximum(sxx - sx * sx / n, 0.0), np.maximum(syy - sy * sy / n, 0.0)
    varies = (vx > 1e-12 * np.maximum(sxx, 1e-300)) & (vy > 1e-12 * np.maximum(syy, 1e-300))  # not cancellation
    r = np.divide(cov, np.sqrt(vx * vy), out=np.zeros_like(cov), where=varies)
    r[:, 0] = np.nan
    return r


def query_rows(n_images: int, n_queries: int, seed: int = 0) -> np.ndarray:
    """The evaluation's query images: ``n_queries`` of the split's images (1k in the paper), drawn once by seed,
    sorted; all of them when the split is smaller."""
    if n_queries >= n_images:
        return np.arange(n_images)
    return np.sort(np.random.default_rng(seed).choice(n_images, n_queries, replace=False))
