"""The label-distance floor (issue #46): two different images whose labels are identical (distance 0).

The log-ratio compares log D(y_a, y_i) with log D(f_a, f_i); at D(y) = 0 that is log(train.log_ratio_eps) =
log(1e-6) = -13.8, and the pair's residual (about 14 against the batch's typical few units, squared: ~200)
outweighs every other triplet of its anchor. On templated captions identical caption sets happen. The floor
raises such a distance to ``train.label_floor`` (``half_min``: half the smallest positive distance of the
training neighbour graph), which keeps every ordering (0 < floor < any positive distance), so mining and the
ranking losses see the same triplets; only the losses that read magnitudes (log-ratio) change, and only at
those pairs. An image's distance to itself stays 0.
"""
from __future__ import annotations

import numpy as np

from capcore.errors import CapawareError
from embedder.labels.graph import NeighbourGraph

def floor_value(setting: str, graph: NeighbourGraph) -> float | None:
    """``train.label_floor`` as a number: None (no floor), half the smallest positive neighbour distance, or
    the number written."""
    if setting == "none":
        return None
    if setting == "half_min":
        positive = graph.nn_dist[graph.nn_dist > 0]
        if not len(positive):
            raise CapawareError("train.label_floor", "half_min: the neighbour graph has no positive distance",
                                "set a number instead")
        return float(positive.min()) / 2
    return float(setting)


def zero_count(graph: NeighbourGraph) -> int:
    """Neighbour pairs (of N x M) whose labels are identical."""
    return int((graph.nn_dist <= 0).sum())


class FlooredSpace:
    """A LabelSpace whose distances between different items are at least ``floor``."""

    def __init__(self, inner, floor: float):
        self.inner, self.floor = inner, float(floor)
        self.name = inner.name

    def __len__(self) -> int:
        return len(self.inner)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        rows, cols = np.asarray(rows), np.asarray(cols)
        out = np.maximum(self.inner.pairwise(rows, cols), np.float32(self.floor))
        out[rows[:, None] == cols[None, :]] = 0.0
        return out

    def params(self) -> dict:
        return {**self.inner.params(), "label_floor": self.floor}


def floored_graph(graph: NeighbourGraph, floor: float) -> NeighbourGraph:
    return NeighbourGraph(graph.nn_idx, np.maximum(graph.nn_dist, np.float32(floor)),
                          {**graph.attrs, "label_floor": floor})
