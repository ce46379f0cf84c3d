"""Images/s the captioners' loader delivers to the training loop at paper sizes (issue #47):
``python benchmarks/bench_caption_loader.py [--images 4096] [--batch 16] [--workers 2] [--repeats 3] [--dir DIR]``

A features file of COCO's shapes (att 14 x 14 x 2048 and fc 2048, float16, one image per chunk, as stage two writes
it: about 0.8 MB an image, 3.3 GB at 4,096 images) is written once with random values, then read through
``captioners.data.loader`` in training order (EpochBatches), batch by batch, until every batch of the epoch is in
the training loop's own memory. On a GPU run that last step is ``pin_memory``'s copy of each batch into its cached
pinned blocks; here, with no GPU, the loop makes that copy itself into reused buffers, the same for every variant
(the cast to float32 of the float16 variants then happens on the device, ``on_device``). A CPU-only run also pays
that cast on the host: ``--host-cast`` measures it on its own, after the loader figures.

- before: each image read on its own, the batch stacked and cast to float32 in the collate (in the workers
  when there are any), a loader per epoch: the path before commit c815a93;
- float16: each image read on its own and stacked, handed over in the file's float16, a loader per epoch: the path
  from c815a93 to before d5ac199;
- batched: the whole batch read by ``CaptionDataset.__getitems__`` straight into one float16 buffer per tensor, in
  fresh shared memory inside a worker, one loader for the run: the path from d5ac199 to before the slots;
- after: as batched, but each worker reads into its ring of reused shared buffers (``captioners.batch_slots``).
- after, CPU run (printed once per setting): after as a CPU run takes it, with ``take``'s copy out of the slot
  into fresh memory in place of pin_memory's copy.

Warm: the file in the page cache (read once before timing). Cold: the file dropped from the page cache before each
repetition with ``posix_fadvise(DONTNEED)`` (no root needed), so every byte comes from the disk. Each variant is
timed ``--repeats`` times in alternation; the median and the best are printed, with the machine.
"""
from __future__ import annotations

import argparse
import math
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
from captioners.batch_slots import BatchSlots  # noqa: E402
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


class FreshSlots(BatchSlots):
    """A worker's buffers made new for every batch in fresh shared memory, as the batched path made them (torch's
    own default_collate allocates its batches with the same private storage call), each with its own stamp."""

    def claim(self, rows, n):
        self.buffers = {name: fresh_shared((1, n, *shape), dtype) for name, (shape, dtype) in rows.items()}
        self.stamps = fresh_shared((1,), torch.int64)
        return super().claim(rows, n)


def fresh_shared(shape: tuple[int, ...], dtype: torch.dtype) -> torch.Tensor:
    storage = torch.empty(0, dtype=dtype)._typed_storage()._new_shared(math.prod(shape))
    return torch.empty(0, dtype=dtype).set_(storage).view(shape)


class FreshShared(CaptionDataset):
    """The batched path: in a worker, each batch read into fresh shared memory."""

    def _worker_slots(self):
        if torch.utils.data.get_worker_info() is None:
            return None
        if getattr(self, "_fresh", None) is None:
            self._fresh = FreshSlots(count=1)
        return self._fresh


VARIANTS = ("before", "float16", "batched", "after")


class PinStandIn:
    """What pin_memory does on a GPU run, without a GPU: each batch's features copied into reused buffers."""

    def __init__(self):
        self.buffers = {}

    def __call__(self, batch: dict) -> None:
        for name in ("att", "fc"):
            x = batch[name]
            if (self.buffers.get(name) is None or self.buffers[name].shape != x.shape
                    or self.buffers[name].dtype != x.dtype):
                self.buffers[name] = torch.empty_like(x)
            self.buffers[name].copy_(x)


def as_variant(dataset: CaptionDataset, variant: str) -> CaptionDataset:
    kind = {"before": PerImage, "float16": PerImage, "batched": FreshShared}.get(variant)
    if kind is None:
        return dataset
    out = kind.__new__(kind)
    out.__dict__.update(dataset.__dict__)
    return out


def epoch(dataset: CaptionDataset, batch: int, workers: int, variant: str, run_loaders: dict, k: int,
          cpu_run: bool = False) -> float:
    """Images/s into the loop's memory over epoch ``k``. Before and float16 build a loader per epoch, as the code did
    then (its workers start again); batched and after reuse one loader for the run (``RunBatches``, persistent
    workers), whose worker start is paid once, before the timed epochs. ``cpu_run``: after as a CPU run takes it."""
    real = caption_data.collate
    if variant == "before":
        caption_data.collate = collate_float32  # the loader's collate_fn is looked up when the loader is made
    dataset = as_variant(dataset, variant)
    try:
        batches = EpochBatches(len(dataset), batch, seed=0, epoch=k)
        if variant in ("batched", "after"):
            if (workers, variant, cpu_run) not in run_loaders:
                run = caption_data.RunBatches()
                dl = caption_data.loader(dataset, run, workers, torch.device("cpu"), persistent=True)
                dl.copies_out = cpu_run  # a GPU run's pin_memory copies it out (PinStandIn below)
                run.use(EpochBatches(len(dataset), batch, seed=0, epoch=10 ** 6))  # not a timed epoch
                for _ in dl:  # the workers start (once a run)
                    break
                run_loaders[workers, variant, cpu_run] = run, dl
            run, loader = run_loaders[workers, variant, cpu_run]
            run.use(batches)
        else:
            loader = caption_data.loader(dataset, batches, workers, torch.device("cpu"))
        pin = (lambda b: None) if cpu_run else PinStandIn()
        t0, n = time.perf_counter(), 0
        for b in loader:
            pin(b)
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
                print(f"{cache:4} workers {workers}: "
                      f"after / before = {after / statistics.median(runs['before']):.2f}x, "
                      f"after / batched = {after / statistics.median(runs['batched']):.2f}x", flush=True)
                if workers:
                    if cache == "cold":
                        drop_cache(path)
                    cpu = epoch(dataset, a.batch, workers, "after", run_loaders, a.repeats, cpu_run=True)
                    print(f"{cache:4} workers {workers}: after, CPU run (take's own copy) {cpu:7.0f} images/s",
                          flush=True)
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
