"""The feature dump's host cost per image at paper sizes, before and after issue #47's change:
``python benchmarks/bench_dump_host.py [--images 512] [--batch 16] [--step-ms 31] [--repeats 3] [--dir DIR]``

Rows of COCO's shapes (att 196 x 2048 and fc 2048, float32 out of the network, float16 on disk) go into an HDF5
file laid out as stage two writes it (one image per chunk):

- before: the loop casts each batch to float16 on the host (``numpy.astype``) and writes it, flushing, before
  the next batch starts: the path before commit e35870d;
- after: the batch is cast where the network ran (``torch`` ``.to(float16)``; on a GPU that is device work, on
  this CPU-only machine it is timed on the host and shown on its own) and handed to
  ``feature_extract.dump.RowWriter``, whose thread writes it while the next batch computes.

The loop's time per image is measured with a stand-in network step of ``--step-ms`` per batch (``time.sleep``,
which leaves the cores free as a GPU would; 31 ms is the H200's ResNet-101 step of docs/gpu.md): what the loop
thread spends beyond it is the dump's host cost. Median of ``--repeats`` runs, alternated, with the machine.
"""
from __future__ import annotations

import argparse
import shlex
import statistics
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from feature_extract.dump import RowWriter  # noqa: E402

REGIONS, CHANNELS = 196, 2048


def empty_dump(path: Path, n: int) -> None:
    with h5py.File(path, "w") as f:
        f.create_dataset("att", (n, REGIONS, CHANNELS), np.float16, chunks=(1, REGIONS, CHANNELS))
        f.create_dataset("fc", (n, CHANNELS), np.float16, chunks=(1, CHANNELS))
        f.create_dataset("skipped", (n,), bool)
        f.attrs.update({"n_done": 0, "n_skipped": 0, "complete": False})


def before(path: Path, att: torch.Tensor, fc: torch.Tensor, n: int, step: float) -> float:
    """Seconds of the loop thread per image beyond the network step: host cast, then a synchronous write."""
    b = len(att)
    with h5py.File(path, "r+") as f:
        t0 = time.perf_counter()
        for lo in range(0, n, b):
            time.sleep(step)
            f["att"][lo:lo + b] = att.numpy().astype(np.float16)
            f["fc"][lo:lo + b] = fc.numpy().astype(np.float16)
            f["skipped"][lo:lo + b] = False
            f.flush()
            f.attrs["n_done"] = lo + b
            f.flush()
        return (time.perf_counter() - t0 - step * (n // b)) / n


def after(path: Path, att: torch.Tensor, fc: torch.Tensor, n: int, step: float) -> float:
    """The same with the cast in torch and the write in RowWriter's thread."""
    b, skipped = len(att), np.zeros(len(att), bool)
    writer = RowWriter(path, path, 0, None)
    t0 = time.perf_counter()
    try:
        for k, lo in enumerate(range(0, n, b)):
            time.sleep(step)
            writer.submit(k, lo, lo + b, att.to(torch.float16), fc.to(torch.float16), skipped)
    finally:
        writer.close(True)
    return (time.perf_counter() - t0 - step * (n // b)) / n


def per_image(fn, reps: int = 20) -> float:
    t0 = time.perf_counter()
    for _ in range(reps):
        fn()
    return (time.perf_counter() - t0) / reps


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--images", type=int, default=512)
    ap.add_argument("--batch", type=int, default=16)
    ap.add_argument("--step-ms", type=float, default=31.0)
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--dir", default=None)
    a = ap.parse_args()
    print("$ python " + shlex.join(sys.argv), flush=True)
    n = a.images - a.images % a.batch
    g = torch.Generator().manual_seed(0)
    att = torch.rand(a.batch, REGIONS, CHANNELS, generator=g)
    fc = att.mean(1)
    print(f"{cpu_line()}, torch {torch.__version__}, {torch.get_num_threads()} threads; {n} images of 196 x 2048 "
          f"+ 2048, batch {a.batch}, a stand-in network step of {a.step_ms:g} ms a batch")
    numpy_cast = per_image(lambda: (att.numpy().astype(np.float16), fc.numpy().astype(np.float16))) / a.batch
    torch_cast = per_image(lambda: (att.to(torch.float16), fc.to(torch.float16))) / a.batch
    print(f"cast float32 -> float16 per image: numpy astype on the host {1e3 * numpy_cast:.2f} ms (before); torch "
          f"on this CPU {1e3 * torch_cast:.2f} ms (after; on a GPU it is device work)")
    runs = {"before": [], "after": []}
    with tempfile.TemporaryDirectory(dir=a.dir) as tmp:
        for _ in range(a.repeats):
            for name, fn in (("before", before), ("after", after)):
                path = Path(tmp) / f"{name}.h5"
                empty_dump(path, n)
                runs[name].append(fn(path, att, fc, n, a.step_ms / 1e3))
                path.unlink()
    for name, secs in runs.items():
        print(f"{name:6}: the loop thread spends {1e3 * statistics.median(secs):.2f} ms an image beyond the network "
              f"step (best {1e3 * min(secs):.2f}; {1 / statistics.median(secs):,.0f} images/s at most)")
    print(f"before / after = {statistics.median(runs['before']) / statistics.median(runs['after']):.1f}x")


if __name__ == "__main__":
    main()
