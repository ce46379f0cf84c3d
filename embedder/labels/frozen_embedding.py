"""The self-distillation label space (issue #56): the distance between two images is the Euclidean distance
between the frozen Img trunk's own pooled features of them.

A row trained on these labels (Img-self) takes the Cap row's whole-image steps (same loss, mining, images,
learning rate, jitter) with labels that carry nothing Img does not already know: whatever it gains over Img is
the steps' doing, not label information. Continuous, so identical labels (and the label floor) do not arise.
"""
from __future__ import annotations

import numpy as np


class FrozenEmbeddingSpace:
    name = "frozen_embedding"

    def __init__(self, features: np.ndarray, source: str):
        self.features = np.ascontiguousarray(features, dtype=np.float64)
        self.sq = (self.features ** 2).sum(1)
        self.source = source  # what computed the features (the trunk's checkpoint): part of the graph's identity

    def __len__(self) -> int:
        return len(self.features)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        rows, cols = np.asarray(rows), np.asarray(cols)
        sq = self.sq[rows][:, None] + self.sq[cols][None, :] - 2.0 * self.features[rows] @ self.features[cols].T
        return np.sqrt(np.maximum(sq, 0.0)).astype(np.float32)  # float64 first: no negative round-off under sqrt

    def params(self) -> dict:
        return {"features": self.source, "dim": int(self.features.shape[1])}
