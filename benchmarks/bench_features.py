"""Feature dump speed, size and memory: ours vs a plain batched loop and vs one image at a time.

``python benchmarks/bench_features.py [--n 256] [--size 224] [--batch 16] [--workers 0] [--repeats 3]
[--mem-n 32] [--mem-size 64] [--mem-att 32] [--threads 2]``

Same backbone (resnet18 trunk, weights of a fresh Embedder: speed does not depend on them), same
synthetic shapes-captions images (256 px PNGs, generated into a temporary folder), same input size
and att grid. The strongest baseline is a plain batched loop (decode and resize ``--batch`` images,
one forward, float32 rows into one HDF5 file); ours is first compared with it in float32, and its
precision and storage changes (float16 storage, bfloat16 autocast) are quoted on their own. The
older baseline is what captioning repos commonly ship (self-critical.pytorch's prepro_feats): decode,
resize, forward one image under ``no_grad``, save one compressed ``.npz`` per image. Throughput: median (and best)
of ``--repeats`` runs, variants timed in alternation, the first run included (it pays one-off costs alike for all),
at ``--threads`` and at 1 thread. Memory: peak RSS of a ``python -m feature_extract`` process at ``--mem-n`` and 4x
as many images, with a tiny input pooled to a large grid (1 MiB of att per image) so that features held in memory
would show at once while the forward stays cheap.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import h5py
import numpy as np
import torch
import torch.nn.functional as F

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capcore.cpu_isa import cpu_line  # noqa: E402
from capcore.checkpoint import save_checkpoint  # noqa: E402
from capdata.images import load_rgb  # noqa: E402
from capdata.synthetic import generate_captions  # noqa: E402
from embedder.data import IMAGENET_MEAN, IMAGENET_STD  # noqa: E402
from embedder.model import Embedder  # noqa: E402
from feature_extract.config import load_features_config  # noqa: E402
from feature_extract.dump import dump  # noqa: E402
from feature_extract.sources import resize  # noqa: E402


def one_at_a_time(model, paths, ids, size: int, att_size: int, out_dir: Path) -> None:
    """The common practice: a Python loop over images, one forward and one .npz file each."""
    out_dir.mkdir(parents=True, exist_ok=True)
    with torch.no_grad():
        for path, image_id in zip(paths, ids):
            img = resize(load_rgb(path), "square", size)
            x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255).permute(2, 0, 1)[None]
            fmap = model.features((x - IMAGENET_MEAN) / IMAGENET_STD)
            att = F.adaptive_avg_pool2d(fmap, att_size)[0].permute(1, 2, 0).reshape(-1, fmap.shape[1])
            np.savez_compressed(out_dir / f"{image_id}.npz", att=att.numpy(), fc=fmap.mean((2, 3))[0].numpy())


def batched_float32(model, paths, ids, size: int, att_size: int, batch: int, out: Path) -> None:
    """The strongest plain loop: batches of images through one forward each, float32 rows appended to
    one HDF5 file (no worker, default memory layout, no precision change)."""
    with torch.no_grad(), h5py.File(out, "w") as f:
        att_ds = f.create_dataset("att", (len(paths), att_size * att_size, 512), dtype="float32")
        fc_ds = f.create_dataset("fc", (len(paths), 512), dtype="float32")
        f["image_id"] = np.asarray(ids)
        for s in range(0, len(paths), batch):
            imgs = [np.asarray(resize(load_rgb(p), "square", size), dtype=np.float32) / 255 for p in paths[s:s + batch]]
            x = torch.from_numpy(np.stack(imgs)).permute(0, 3, 1, 2)
            fmap = model.features((x - IMAGENET_MEAN) / IMAGENET_STD)
            att_ds[s:s + len(imgs)] = F.adaptive_avg_pool2d(fmap, att_size).flatten(2).transpose(1, 2).numpy()
            fc_ds[s:s + len(imgs)] = fmap.mean((2, 3)).numpy()


def subset_json(src: Path, dst: Path, n: int) -> Path:
    doc = json.loads(src.read_text())
    doc["images"] = doc["images"][:n]
    dst.write_text(json.dumps(doc))
    return dst


def folder_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file())


def peak_rss_mib(cmd: list[str], env: dict) -> float:
    """Peak resident memory of one child process (``wait4`` reports that child alone)."""
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
    _, status, usage = os.wait4(proc.pid, 0)
    proc.returncode = os.waitstatus_to_exitcode(status)
    if proc.returncode != 0:
        raise SystemExit(f"memory run failed: {proc.stderr.read().decode()[-500:]}")
    return usage.ru_maxrss / 1024  # KiB on Linux


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=256, help="images in the throughput runs (enough that the "
                        "per-run costs of a dump -- backbone load, image hashes, file creation -- weigh little)")
    parser.add_argument("--size", type=int, default=224, help="square input size (224 -> native 7x7 grid)")
    parser.add_argument("--batch", type=int, default=16)
    parser.add_argument("--workers", type=int, default=0, help="DataLoader workers of our dump (0: on 2 cores a "
                        "worker decoding beside the forward's threads slows it down)")
    parser.add_argument("--repeats", type=int, default=3)
    parser.add_argument("--mem-n", type=int, default=32, help="images of the small memory run (large: 4x)")
    parser.add_argument("--mem-size", type=int, default=64, help="input size of the memory runs")
    parser.add_argument("--mem-att", type=int, default=32, help="att grid of the memory runs")
    parser.add_argument("--threads", type=int, default=2)
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    att_size = args.size // 32

    print(f"$ python {' '.join(shlex.quote(a) for a in sys.argv)}")
    print(f"# {cpu_line()}, {os.cpu_count()} cpus, torch {torch.__version__}, "
          f"{args.threads} threads; resnet18, {args.size}x{args.size} input, att {att_size}x{att_size}x512")
    tmp = Path(tempfile.mkdtemp(prefix="bench_features_"))
    try:
        n_images = max(args.n, 4 * args.mem_n)
        full_json = generate_captions(tmp / "data", n_train=n_images, n_val=0, n_test=0, seed=0, size=256)
        json_path = subset_json(full_json, tmp / "data" / "bench.json", args.n)
        ckpt = tmp / "backbone.pt"
        torch.manual_seed(0)
        model = Embedder("resnet18", 8).eval()
        save_checkpoint({"model": model.state_dict(), "arch": "resnet18", "embed_dim": 8,
                         "kind": "class-pretrained"}, ckpt)
        doc = json.loads(json_path.read_text())
        paths = [json_path.parent / e["filepath"] / e["filename"] for e in doc["images"]]
        ids = [e["cocoid"] for e in doc["images"]]

        def ours(name: str, **kw):
            over = {"backbone.checkpoint": ckpt, "images.captions": json_path, "out": tmp / f"{name}.h5",
                    "input.size": args.size, "att_size": att_size, "batch_size": args.batch,
                    "num_workers": args.workers, "device": "cpu", **kw}
            cfg = load_features_config(ROOT / "configs/demo/demo_features_img.yaml",
                                       [f"{k}={v}" for k, v in over.items()])
            return lambda: dump(cfg, "bench", force=True, progress=False)

        def baseline():
            shutil.rmtree(tmp / "npz", ignore_errors=True)
            one_at_a_time(model, paths, ids, args.size, att_size, tmp / "npz")

        def batched():
            batched_float32(model, paths, ids, args.size, att_size, args.batch, tmp / "batched.h5")

        def threads(k: int, fn):
            def run():
                torch.set_num_threads(k)
                try:
                    fn()
                finally:
                    torch.set_num_threads(args.threads)
            return run

        # Both thread counts: on a shared machine a single-image forward with 2 threads can collapse
        # (threads wait on each other at every small op), so the 1-thread loop is the fairer baseline.
        base_name, ours_name = "one image at a time + savez_compressed", "ours: batched, worker, channels_last, f16"
        batched_name, ours32_name = "plain batched loop, float32 h5", "ours, float32 h5"
        counts = sorted({args.threads, 1}, reverse=True)
        variants = {}
        for k in counts:
            variants[(base_name, k)] = threads(k, baseline)
            variants[(batched_name, k)] = threads(k, batched)
            variants[(ours32_name, k)] = threads(k, ours(f"f32_{k}", dtype="float32"))
            variants[(ours_name, k)] = threads(k, ours(f"f16_{k}"))
            variants[("ours + bfloat16 autocast", k)] = threads(k, ours(f"bf16_{k}", precision="bfloat16"))
        times = {key: [] for key in variants}
        for _ in range(args.repeats):
            for key, fn in variants.items():
                start = time.perf_counter()
                fn()
                times[key].append(time.perf_counter() - start)
        med = {key: statistics.median(t) for key, t in times.items()}
        print(f"\n## throughput ({args.n} images, median and best of {args.repeats}; batch {args.batch}, "
              f"{args.workers} worker(s))")
        print(f"{'variant':<44} {'threads':>7} {'img/s':>7} {'(best)':>7} {'vs baseline':>12}")
        for (name, k), t in times.items():
            print(f"{name:<44} {k:>7} {args.n / med[name, k]:>7.1f} {args.n / min(t):>7.1f} "
                  f"{med[base_name, k] / med[name, k]:>11.2f}x")
        best_batched = min(med[batched_name, k] for k in counts)
        best_ours32 = min(med[ours32_name, k] for k in counts)
        best_f16 = min(med[ours_name, k] for k in counts)
        best_bf16 = min(med["ours + bfloat16 autocast", k] for k in counts)
        print(f"against the strongest baseline (the plain batched float32 loop, best thread count): ours in "
              f"float32 {best_batched / best_ours32:.2f}x; precision and storage changes on their own: float16 "
              f"storage {best_ours32 / best_f16:.2f}x, bfloat16 autocast {best_f16 / best_bf16:.2f}x on top")

        ours("f32", dtype="float32")()
        ours("lzf", compression="lzf")()
        with h5py.File(tmp / f"f16_{args.threads}.h5") as a, h5py.File(tmp / "f32.h5") as b, \
                h5py.File(tmp / f"bf16_{args.threads}.h5") as c:
            f16, f32, bf16 = a["att"][()].astype(np.float32), b["att"][()], c["att"][()].astype(np.float32)
        normal = np.abs(f32) >= np.finfo(np.float16).tiny  # float16 normal range (subnormals lose bits)
        rel = np.abs(f16 - f32)[normal] / np.abs(f32)[normal]
        print(f"\n## storage ({args.n} images, att [{args.n}, {att_size ** 2}, 512] + fc)")
        for name, path in (("h5 float32", tmp / "f32.h5"), ("h5 float16", tmp / f"f16_{args.threads}.h5"),
                           ("h5 float16 + lzf", tmp / "lzf.h5"), ("baseline .npz float32 (compressed)", tmp / "npz")):
            size = folder_bytes(path) if path.is_dir() else path.stat().st_size
            print(f"{name:<36} {size / 2**20:8.2f} MiB")
        print(f"float16 vs float32: max relative error {rel.max():.2e} (values >= {np.finfo(np.float16).tiny:.1e}), "
              f"max abs error {np.abs(f16 - f32).max():.2e} (max |value| {np.abs(f32).max():.2f})")
        print(f"bfloat16 autocast (stored float16) vs float32: max abs error {np.abs(bf16 - f32).max():.2e}, "
              f"relative to each image's max |value|: "
              f"{(np.abs(bf16 - f32).max((1, 2)) / np.abs(f32).max((1, 2))).max():.2e}")

        per_image = args.mem_att ** 2 * 512 * 2 / 2**20
        print(f"\n## peak memory of `python -m feature_extract` ({args.mem_size}x{args.mem_size} input, "
              f"att {args.mem_att}x{args.mem_att}x512 float16 = {per_image:.1f} MiB per image)")
        env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(args.threads))
        for n in (args.mem_n, 4 * args.mem_n):
            cmd = [sys.executable, "-m", "feature_extract",
                   "--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
                   f"backbone.checkpoint={ckpt}",
                   f"images.captions={subset_json(full_json, full_json.parent / f'm{n}.json', n)}",
                   f"out={tmp / f'mem{n}.h5'}", f"input.size={args.mem_size}", f"att_size={args.mem_att}",
                   f"batch_size={args.batch}", f"num_workers={args.workers}", "device=cpu"]
            rss = peak_rss_mib(cmd, env)
            feats = (tmp / f"mem{n}.h5").stat().st_size / 2**20
            print(f"N = {n:<5} peak RSS {rss:7.1f} MiB   (features written: {feats:6.1f} MiB)")
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


if __name__ == "__main__":
    main()
