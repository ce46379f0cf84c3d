"""Minibatches built around anchors (paper §3.3): anchor + its k label-nearest neighbours + random others.

Each epoch visits every training item once as an anchor, in a fresh seeded order. A batch holds
``anchors_per_batch`` anchors (the paper: 1), each with its k nearest neighbours from the neighbour
graph, then random items drawn without replacement from the rest, up to ``batch_size``. Everything
is a pure function of (seed, epoch, step), so a resumed run draws exactly the batches it would have,
and every process of a torchrun job draws the same global batch (embedder.train gives each process
its share of it).
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np


@dataclass(frozen=True)
class Batch:
    items: np.ndarray  # [B] dataset indices, anchors first
    anchors: np.ndarray  # [A] positions of the anchors inside ``items``


class AnchorBatchSampler:
    def __init__(self, nn_idx: np.ndarray, batch_size: int, k: int = 5, anchors_per_batch: int = 1,
                 seed: int = 0):
        n, m = nn_idx.shape
        if k > m:
            raise ValueError(f"k={k} neighbours asked but the graph keeps only {m}")
        if anchors_per_batch * (k + 1) > batch_size or batch_size > n:
            raise ValueError(f"batch_size={batch_size} cannot hold {anchors_per_batch} anchors with k={k} "
                             f"neighbours each from {n} items")
        self.nn_idx, self.n, self.batch_size, self.k = nn_idx, n, batch_size, k
        self.anchors_per_batch, self.seed = anchors_per_batch, seed

    def steps_per_epoch(self) -> int:
        return -(-self.n // self.anchors_per_batch)

    def anchor_order(self, epoch: int) -> np.ndarray:
        return np.random.default_rng([self.seed, epoch, 0]).permutation(self.n)

    def batch(self, epoch: int, step: int) -> Batch:
        """The ``step``-th batch of ``epoch`` (0-based), independent of any earlier call."""
        order = self.anchor_order(epoch)
        anchors = order[step * self.anchors_per_batch:(step + 1) * self.anchors_per_batch]
        rng = np.random.default_rng([self.seed, epoch, step + 1])
        chosen = list(anchors)
        taken = set(chosen)
        for a in anchors:
            for j in self.nn_idx[a, :self.k]:
                if j not in taken:
                    taken.add(int(j))
                    chosen.append(int(j))
        need = self.batch_size - len(chosen)
        if need > 0:
            pool = np.setdiff1d(np.arange(self.n), np.fromiter(taken, dtype=np.int64), assume_unique=True)
            chosen.extend(rng.choice(pool, size=need, replace=False).tolist())
        return Batch(np.asarray(chosen, dtype=np.int64), np.arange(len(anchors)))

    def epoch(self, epoch: int, start_step: int = 0):
        for step in range(start_step, self.steps_per_epoch()):
            yield step, self.batch(epoch, step)
