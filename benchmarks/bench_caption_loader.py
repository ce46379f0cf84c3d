"""Images/s the captioners' loader delivers to the training loop at paper sizes (issue #47):
``python benchmarks/bench_caption_loader.py [--images 4096] [--batch 16] [--workers 2] [--repeats 3] [--dir DIR]``

A features file of COCO's shapes (att 14 x 14 x 2048 and fc 2048, float16, one image per chunk, as stage two writes
it: about 0.8 MB an image, 3.3 GB at 4,096 images) is written once with random values, then read through
``captioners.data.loader`` in training order (EpochBatches), batch by batch, until every batch of the epoch is in
the training loop's process as the loader hands it over (what a GPU run then copies to the device; the cast to
float32 of the float16 variants happens there, in ``on_device``). A CPU-only run also pays that cast on the host:
``--host-cast`` measures it on its own, after the loader figures.

- before: each image read on its own, the batch stacked and cast to float32 in the collate (in the workers
  when there are any): the path before commit c815a93;
- float16: each image read on its own and stacked, handed over in the file's float16 and cast where the model
  runs (``on_device``): the path from c815a93 to before d5ac199;
- after: the whole batch read by ``CaptionDataset.__getitems__`` straight into one float16 buffer per tensor,
  in shared memory inside a worker, so neither the collate nor the hand-off copies it; cast on the device.

Warm: the file in the page cache (read once before timing). Cold: the file dropped from the page cache before each
repetition with ``posix_fadvise(DONTNEED)`` (no root needed), so every byte comes from the disk. Each variant is
timed ``--repeats`` times in alternation; the median and the best are printed, with the machine.
"""
from __future__ import annotations

import argparse
import os
import shlex
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


class PerImage(CaptionDataset):
    """The dataset without its batched read: the DataLoader calls ``__getitem__`` once per image."""
    __getitems__ = None


VARIANTS = ("before", "float16", "after")


def epoch(dataset: CaptionDataset, batch: int, workers: int, variant: str, run_loaders: dict, k: int) -> float:
    """Images/s into the loop over epoch ``k``: every batch as the loader hands it over. Before and float16 build
    a loader per epoch, as the code did then (its workers start again); after reuses one loader for the run
    (``RunBatches``, persistent workers), whose worker start is paid once, before the timed epochs."""
    real, original = caption_data.collate, dataset
    if variant == "before":
        caption_data.collate = collate_float32  # the loader's collate_fn is looked up when the loader is made
    if variant != "after":
        dataset = PerImage.__new__(PerImage)
        dataset.__dict__.update(original.__dict__)
    try:
        batches = EpochBatches(len(dataset), batch, seed=0, epoch=k)
        if variant == "after":
            if workers not in run_loaders:
                run = caption_data.RunBatches()
                run_loaders[workers] = run, caption_data.loader(dataset, run, workers, torch.device("cpu"), persistent=True)
                run.use(EpochBatches(len(dataset), batch, seed=0, epoch=10 ** 6))  # not a timed epoch
                for _ in run_loaders[workers][1]:  # the workers start (once a run)
                    break
            run, loader = run_loaders[workers]
            run.use(batches)
        else:
            loader = caption_data.loader(dataset, batches, workers, torch.device("cpu"))
        t0, n = time.perf_counter(), 0
        for b in loader:
            n += len(b["att"])
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
    parser.add_argument("--host-cast", action="store_true", help="also time on_device's float32 cast on a CPU")
    a = parser.parse_args()
    print("$ python " + shlex.join(sys.argv), flush=True)
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
                epoch(dataset, a.batch, 0, "after", {}, 0)  # one read puts the whole file in the page cache
            for workers in sorted({0, a.workers}):
                runs, run_loaders = {v: [] for v in VARIANTS}, {}
                for k in range(a.repeats):
                    for variant in VARIANTS:
                        if cache == "cold":
                            drop_cache(path)
                        runs[variant].append(epoch(dataset, a.batch, workers, variant, run_loaders, k))
                for variant, rates in runs.items():
                    print(f"{cache:4} workers {workers}: {variant:7} median {statistics.median(rates):7.0f} "
                          f"images/s (best {max(rates):.0f})", flush=True)
                after = statistics.median(runs["after"])
                print(f"{cache:4} workers {workers}: after / before = {after / statistics.median(runs['before']):.2f}x, "
                      f"after / float16 = {after / statistics.median(runs['float16']):.2f}x", flush=True)
        if a.host_cast:
            batch = dataset.__getitems__(list(range(a.batch)))
            t0 = time.perf_counter()
            for _ in range(a.repeats * 8):
                on_device(batch, torch.device("cpu"))
            rate = a.batch * a.repeats * 8 / (time.perf_counter() - t0)
            print(f"host cast to float32 (a CPU-only run; on a GPU it runs on the device): {rate:.0f} images/s "
                  f"with {torch.get_num_threads()} threads", flush=True)


if __name__ == "__main__":
    main()
