"""Images/s the captioners' loader delivers to the training loop at paper sizes (issue #47):
``python benchmarks/bench_caption_loader.py [--images 4096] [--batch 16] [--workers 2] [--repeats 3] [--dir DIR]``

A features file of COCO's shapes (att 14 x 14 x 2048 and fc 2048, float16, one image per chunk, as stage two writes
it: about 0.8 MB an image, 3.3 GB at 4,096 images) is written once with random values, then read through
``captioners.data.loader`` in training order (EpochBatches), batch by batch, until every image of the epoch is in
the loop as float32 on the host (the CPU's device; on a GPU the cast happens after the copy, as ``on_device`` does):

- before: the batch cast to float32 in the collate (in the workers when there are any), the path up to
  commit c815a93;
- after: the batch handed over in the file's float16 and cast where the model runs (``on_device``).

Warm: the file in the page cache (read once before timing). Cold: the file dropped from the page cache before each
repetition with ``posix_fadvise(DONTNEED)`` (no root needed), so every byte comes from the disk. Each variant is
timed ``--repeats`` times in alternation; the median and the best are printed, with the machine.
"""
from __future__ import annotations

import argparse
import os
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capcore.cpu_isa import cpu_line  # noqa: E402
from captioners import data as caption_data  # noqa: E402
from captioners.data import CaptionDataset, EpochBatches, on_device  # noqa: E402


def write_file(path: Path, n: int, regions: int = 196, channels: int = 2048) -> None:
    rng = np.random.default_rng(0)
    with h5py.File(path, "w") as f:
        att = f.create_dataset("att", (n, regions, channels), np.float16, chunks=(1, regions, channels))
        fc = f.create_dataset("fc", (n, channels), np.float16, chunks=(1, channels))
        for lo in range(0, n, 256):
            hi = min(n, lo + 256)
            att[lo:hi] = rng.standard_normal((hi - lo, regions, channels), np.float32).astype(np.float16)
            fc[lo:hi] = att[lo:hi].astype(np.float32).mean(1).astype(np.float16)
        f.create_dataset("image_id", data=np.arange(n, dtype=np.int64))
        f.create_dataset("skipped", data=np.zeros(n, bool))
        f.attrs.update({"complete": True, "n_done": n, "n_skipped": 0, "att_size": 14, "channels": channels})


COLLATE = caption_data.collate  # the current one: float16 across the hand-off


def collate_float32(items: list[dict]) -> dict:
    """The path before: the workers convert every batch to float32 before the hand-off."""
    out = COLLATE(items)
    return {**out, "att": out["att"].float(), "fc": out["fc"].float()}


def drop_cache(path: Path) -> None:
    fd = os.open(path, os.O_RDONLY)
    try:
        os.fsync(fd)
        os.posix_fadvise(fd, 0, 0, os.POSIX_FADV_DONTNEED)
    finally:
        os.close(fd)


def epoch(dataset: CaptionDataset, batch: int, workers: int, before: bool) -> float:
    """Images/s into the loop: every batch of one epoch as float32 tensors in this process."""
    real = caption_data.collate
    if before:
        caption_data.collate = collate_float32  # the loader's collate_fn is looked up when the loader is made
    try:
        loader = caption_data.loader(dataset, EpochBatches(len(dataset), batch, seed=0, epoch=0), workers,
                                     torch.device("cpu"))
        t0, n = time.perf_counter(), 0
        for b in loader:
            fc, att = on_device(b, torch.device("cpu"))
            n += len(att)
        return n / (time.perf_counter() - t0)
    finally:
        caption_data.collate = real


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=4096)
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--dir", default=None, help="where the features file goes [a temporary folder]")
    a = parser.parse_args()
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        path = Path(tmp) / "feats.h5"
        t0 = time.perf_counter()
        write_file(path, a.images)
        size = path.stat().st_size / 1e9
        print(f"features file: {a.images} images, 14 x 14 x 2048 float16, {size:.2f} GB, written in "
              f"{time.perf_counter() - t0:.0f} s; {cpu_line()}, {os.cpu_count()} cores; batch {a.batch}")
        dataset = CaptionDataset(path, None, split="all")
        for cache in ("cold", "warm"):
            if cache == "warm":
                epoch(dataset, a.batch, 0, before=False)  # one read puts the whole file in the page cache
            for workers in sorted({0, a.workers}):
                runs = {"before": [], "after": []}
                for _ in range(a.repeats):
                    for variant in ("before", "after"):
                        if cache == "cold":
                            drop_cache(path)
                        runs[variant].append(epoch(dataset, a.batch, workers, variant == "before"))
                for variant, rates in runs.items():
                    print(f"{cache:4} workers {workers}: {variant:6} median {statistics.median(rates):7.0f} "
                          f"images/s (best {max(rates):.0f})", flush=True)
                ratio = statistics.median(runs["after"]) / statistics.median(runs["before"])
                print(f"{cache:4} workers {workers}: after / before = {ratio:.2f}x", flush=True)


if __name__ == "__main__":
    main()
