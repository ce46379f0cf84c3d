"""The shuffled-label control (issue #46, Cap-shuffled): every training image takes the label of another.

One fixed permutation ``owner`` (a single cycle, so no image keeps its own label) gives image i the label of
image owner[i]. The label distances keep their distribution, row for row, and no longer describe the
images: what a trunk learns from them beyond what the same steps on real labels teach is the effect of the
training alone. Evaluation keeps the real labels (embedder.track applies this to the training side only).
"""
from __future__ import annotations

import numpy as np

from embedder.labels.graph import NeighbourGraph


def single_cycle(n: int, seed: int) -> np.ndarray:
    """A uniformly drawn cyclic permutation of range(n) (Sattolo's algorithm): owner[i] != i for every i."""
    owner = np.arange(n)
    rng = np.random.default_rng([seed, n])
    for i in range(n - 1, 0, -1):
        j = int(rng.integers(i))  # j < i: never i itself, which is what makes one cycle
        owner[i], owner[j] = owner[j], owner[i]
    return owner


class ShuffledSpace:
    """A LabelSpace whose item i has the label of item ``owner[i]`` of ``inner``."""

    def __init__(self, inner, owner: np.ndarray, seed: int):
        self.inner, self.owner, self.seed = inner, np.asarray(owner), seed
        self.name = inner.name

    def __len__(self) -> int:
        return len(self.inner)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return self.inner.pairwise(self.owner[np.asarray(rows)], self.owner[np.asarray(cols)])

    def params(self) -> dict:
        return {**self.inner.params(), "shuffled_labels_seed": self.seed}


def shuffled_graph(graph: NeighbourGraph, owner: np.ndarray) -> NeighbourGraph:
    """The neighbour graph of the shuffled labels, from the real one without a new search: image i's neighbours
    are the images whose labels neighbour owner[i]'s, at the same distances (re-sorted by (distance, index))."""
    holder = np.argsort(owner)  # holder[k]: the image that now carries image k's label
    idx = holder[graph.nn_idx[owner]]
    dist = graph.nn_dist[owner]
    order = np.lexsort((idx, dist), axis=1)
    return NeighbourGraph(np.take_along_axis(idx, order, 1).astype(np.int32),
                          np.take_along_axis(dist, order, 1), {**graph.attrs, "shuffled_labels": True})
