"""Statistics of a features file: per-channel mean and sd over chosen rows (the captioners' input
standardisation, issue #46) and the mean L2 norms of ``att`` cells and ``fc`` (the feature-scale table).

Read in row blocks with float64 sums, so a COCO-sized file (113k x 196 x 2048) is never held in memory and
the statistics do not depend on the block size beyond rounding.
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from capcore.h5read import read_h5

BLOCK = 256


@dataclass(frozen=True)
class ChannelStats:
    fc_mean: np.ndarray  # [C] float32
    fc_std: np.ndarray
    att_mean: np.ndarray  # [C'] over every cell of every row
    att_std: np.ndarray


def _blocks(rows: np.ndarray):
    rows = np.sort(np.asarray(rows, dtype=np.int64))
    for start in range(0, len(rows), BLOCK):
        yield rows[start:start + BLOCK]


def _read(ds, block: np.ndarray) -> np.ndarray:
    lo, hi = int(block[0]), int(block[-1]) + 1
    return ds[lo:hi][block - lo].astype(np.float64) if hi - lo <= 2 * len(block) else \
        np.stack([ds[int(r)] for r in block]).astype(np.float64)


def channel_stats(path: str | Path, rows: np.ndarray, min_std: float = 1e-6) -> ChannelStats:
    """Mean and sd (population) of each channel of ``fc`` and of ``att`` (pooled over cells) on ``rows``;
    an sd below ``min_std`` (a channel that never varies, e.g. a dead ReLU) becomes 1, so it passes unscaled."""
    def read(f):
        sums = {k: [0.0, 0.0, 0] for k in ("fc", "att")}
        for block in _blocks(rows):
            for key in ("fc", "att"):
                x = _read(f[key], block).reshape(-1, f[key].shape[-1])
                s = sums[key]
                s[0], s[1], s[2] = s[0] + x.sum(0), s[1] + (x * x).sum(0), s[2] + len(x)
        out = []
        for key in ("fc", "att"):
            total, square, n = sums[key]
            mean = total / n
            std = np.sqrt(np.maximum(square / n - mean * mean, 0.0))
            out += [mean.astype(np.float32), np.where(std < min_std, 1.0, std).astype(np.float32)]
        return ChannelStats(*out)

    return read_h5(path, read, "features file", "dump it first: python -m feature_extract --config ...",
                   "dump it again: python -m feature_extract --config ...")


def mean_norms(path: str | Path) -> dict[str, float]:
    """The mean L2 norm of an ``att`` cell vector and of an ``fc`` vector over every valid row."""
    def read(f):
        valid = np.flatnonzero(~f["skipped"][()]) if "skipped" in f else np.arange(len(f["fc"]))
        sums, counts = {"att": 0.0, "fc": 0.0}, {"att": 0, "fc": 0}
        for block in _blocks(valid):
            for key in ("att", "fc"):
                x = _read(f[key], block).reshape(-1, f[key].shape[-1])
                sums[key] += float(np.linalg.norm(x, axis=1).sum())
                counts[key] += len(x)
        return {f"{k}_l2": sums[k] / max(counts[k], 1) for k in sums} | {"images": len(valid)}

    return read_h5(path, read, "features file", "dump it first: python -m feature_extract --config ...",
                   "dump it again: python -m feature_extract --config ...")
