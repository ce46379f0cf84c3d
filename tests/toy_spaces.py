"""A label space for unit tests: one number per item, the distance |x_i - x_j| (ties and zeros where the
numbers repeat). The graph, shuffled-label, label-floor and row-label tests build theirs from it."""
from __future__ import annotations

import numpy as np


class LineLabels:
    name = "line"

    def __init__(self, x):
        self.x = np.asarray(x, dtype=np.float64)

    def __len__(self) -> int:
        return len(self.x)

    def pairwise(self, rows, cols) -> np.ndarray:
        return np.abs(self.x[np.asarray(rows)][:, None] - self.x[np.asarray(cols)][None, :]).astype(np.float32)

    def params(self) -> dict:
        return {"items": len(self.x)}
