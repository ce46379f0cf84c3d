"""Timing shared by the benchmarks."""
from __future__ import annotations

import statistics
import time


def median_seconds(fns, repeats: int, warmup: int = 3) -> list[tuple[float, float]]:
    """(median, min) wall seconds of each function, timed in alternation so that bursts of load
    from other jobs hit every variant alike; the min shows what such bursts added."""
    for _ in range(warmup):
        for fn in fns:
            fn()
    times = [[] for _ in fns]
    for _ in range(repeats):
        for fn, acc in zip(fns, times):
            start = time.perf_counter()
            fn()
            acc.append(time.perf_counter() - start)
    return [(statistics.median(t), min(t)) for t in times]
