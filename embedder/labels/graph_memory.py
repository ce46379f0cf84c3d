"""How many processes the caption graph may use: as many as the cores allow, and no more than memory holds.

Each graph worker is a spawned process with its own copy of the caption space (centroids, nBOW rows,
word vectors) and its own searcher, so its memory grows with the number of training images N. At COCO's
113,287 images one worker peaks near 2.7 GB, and the 16 workers a 16-core machine would start need
about 45 GB. ``graph.workers: null`` (the default) takes the cores' count capped by the memory this
machine has left; a number the user sets is kept, and the preflight refuses it in one line when it
cannot fit (capaware.preflight).

The per-worker line is the least-squares fit through peaks measured by
``benchmarks/bench_caption_graph_memory.py`` at 2,500-20,000 images (a COCO-sized vocabulary, 300-D vectors) and
the review's 2.71 GB at 113,287 (benchmarks/results/caption_graph_memory.json names the command, the CPU and
every point; the line misses none by more than 4%). tests/embedder/test_graph_memory.py refits it from that file.
"""
from __future__ import annotations

WORKER_BASE_BYTES = 770_809_320
WORKER_BYTES_PER_IMAGE = 17_068
HEADROOM = 0.85
"""Share of the available memory the workers may take: the parent process holds the space too."""


def worker_bytes(n_images: int) -> int:
    """Peak resident memory of one graph worker for a caption set of ``n_images`` images."""
    return int(WORKER_BASE_BYTES + WORKER_BYTES_PER_IMAGE * n_images)


def workers_that_fit(n_images: int, memory: int, processes: int = 1) -> int:
    """Workers one of ``processes`` ranks on this machine may start within ``memory`` bytes (at least 1)."""
    return max(1, int(HEADROOM * memory / processes // worker_bytes(n_images)))


def graph_workers(requested: int | None, n_images: int, cores: int, memory: int | None,
                  processes: int = 1) -> tuple[int, str]:
    """(workers, why): ``requested`` when the user set it; else this rank's share of the cores, capped by
    the memory when the machine says how much it has."""
    if requested is not None:
        return max(1, requested), f"graph.workers={requested}"
    by_cores = max(1, cores // processes)
    if memory is None:
        return by_cores, f"{by_cores} of {cores} cores (this machine does not report its free memory)"
    by_memory = workers_that_fit(n_images, memory, processes)
    workers = min(by_cores, by_memory)
    return workers, (f"{workers} worker processes: {cores} cores, {memory / 1e9:.1f} GB available, about "
                     f"{worker_bytes(n_images) / 1e9:.2f} GB a worker for {n_images:,} images"
                     + (f", {processes} ranks on this machine" if processes > 1 else ""))
