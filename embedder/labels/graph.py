"""The neighbour-graph file ``labels.h5``: each training item's top-M label neighbours.

Format (docs/design.md): ``nn_idx [N, M] int32`` and ``nn_dist [N, M] float32`` sorted ascending by
(distance, index), self excluded; attrs name the label space and its parameters, plus ``complete``
written last so a half-written file is never mistaken for a whole one.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
from tqdm import tqdm

from capcore.atomic import atomic_path
from capcore.errors import CapawareError
from capcore.h5read import read_h5
from embedder.labels.space import LabelSpace
from embedder.retrieval import oracle_ranking


@dataclass
class NeighbourGraph:
    nn_idx: np.ndarray  # [N, M] int32
    nn_dist: np.ndarray  # [N, M] float32
    attrs: dict

    def __len__(self) -> int:
        return len(self.nn_idx)


def write_graph(path: str | Path, nn_idx: np.ndarray, nn_dist: np.ndarray, attrs: dict) -> None:
    if nn_idx.shape != nn_dist.shape or nn_idx.ndim != 2:
        raise ValueError(f"nn_idx {nn_idx.shape} and nn_dist {nn_dist.shape} must be the same [N, M]")
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("nn_idx", data=nn_idx.astype(np.int32))
            f.create_dataset("nn_dist", data=nn_dist.astype(np.float32))
            for key, value in attrs.items():
                f.attrs[key] = value if isinstance(value, (int, float, str)) else json.dumps(value)
            f.attrs["complete"] = True


def read_graph(path: str | Path) -> NeighbourGraph:
    path = Path(path)

    def read(f) -> NeighbourGraph:
        if not f.attrs.get("complete", False):
            raise CapawareError(path, "neighbour graph is incomplete (a build was interrupted)",
                                "rerun the graph build; it resumes")
        attrs = {k: (v.item() if hasattr(v, "item") else v) for k, v in f.attrs.items()}
        return NeighbourGraph(f["nn_idx"][()], f["nn_dist"][()], attrs)

    return read_h5(path, read, "neighbour graph", "build it first (python -m embedder.rows --config CFG, or "
                   "embedder.graph_shards build + merge)", "delete it and rebuild")


def top_m_sorted(dist: np.ndarray, rows: np.ndarray, m: int,
                 tie_seed: int | None = None) -> tuple[np.ndarray, np.ndarray]:
    """Top-m smallest of each row of ``dist`` (columns = item ids), self (``rows``) excluded, ties by id; or,
    with ``tie_seed``, ties in a random order of each row's own, drawn from (seed, row id): equal distances
    then favour no image, and a row's neighbours do not depend on which shard computed it."""
    dist = dist.astype(np.float64, copy=True)
    dist[np.arange(len(rows)), rows] = np.inf
    if tie_seed is None:
        idx = oracle_ranking(dist, m)
    else:
        orders = np.stack([np.random.default_rng([int(tie_seed), 56, int(r)]).permutation(dist.shape[1])
                           for r in rows])
        idx = np.take_along_axis(orders, oracle_ranking(np.take_along_axis(dist, orders, 1), m), 1)
    return idx.astype(np.int32), np.take_along_axis(dist, idx, axis=1).astype(np.float32)


def check_rows(rows: tuple[int, int] | None, n: int) -> tuple[int, int]:
    """``rows`` = [lo, hi) of the items whose neighbours are wanted (a shard); None = all ``n``."""
    lo, hi = (0, n) if rows is None else (int(rows[0]), int(rows[1]))
    if not 0 <= lo < hi <= n:
        raise CapawareError("rows", f"row range [{lo}, {hi}) is empty or outside 0..{n}",
                            "ask for rows inside the label space")
    return lo, hi


def build_graph_bruteforce(space: LabelSpace, m: int, chunk: int = 256, progress: bool = True,
                           rows: tuple[int, int] | None = None, tie_seed: int | None = None) -> NeighbourGraph:
    """All-pairs top-m for label spaces whose batched ``pairwise`` is cheap (poses, layouts).

    ``rows=(lo, hi)`` computes only those rows (searched over all items), so a graph can be built
    in shards; each row is computed the same way either way, so shards concatenate to the whole.
    ``tie_seed``: equal label distances (common in a discrete space: kinds) are ordered by a permutation drawn
    from this seed, not by id (issue #56: by id, dense mining over-draws low-id images as positives).
    """
    n = len(space)
    if m >= n:
        raise CapawareError(space.name, f"asked for {m} neighbours of {n} items", "lower graph.m below the set size")
    lo, hi = check_rows(rows, n)
    cols = np.arange(n)
    nn_idx = np.empty((hi - lo, m), np.int32)
    nn_dist = np.empty((hi - lo, m), np.float32)
    for start in tqdm(range(lo, hi, chunk), desc=f"graph {space.name}", disable=not progress, leave=False):
        q = cols[start:min(hi, start + chunk)]
        nn_idx[q - lo], nn_dist[q - lo] = top_m_sorted(space.pairwise(q, cols), q, m, tie_seed)
    ties = {} if tie_seed is None else {"tie_seed": int(tie_seed)}
    return NeighbourGraph(nn_idx, nn_dist, {"label_space": space.name, "m": m,
                                            "params": json.dumps(space.params(), sort_keys=True), **ties})
