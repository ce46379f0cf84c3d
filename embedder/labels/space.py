"""The interface every label space implements.

A label space knows the labels of N items (in a fixed order) and returns label distances between
items by index, batched. Samplers, graph builders and retrieval metrics only talk to this.
"""
from __future__ import annotations

from typing import Protocol

import numpy as np


class LabelSpace(Protocol):
    name: str

    def __len__(self) -> int: ...

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float32 [len(rows), len(cols)] label distances D(y_r, y_c) (0 on identical labels)."""
        ...

    def params(self) -> dict:
        """JSON-able parameters that identify the space (stored as neighbour-graph attrs)."""
        ...
