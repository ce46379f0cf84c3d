"""Dump att/fc features of every listed image to ``feats.h5``: batched, streaming, resumable.

``python -m feature_extract --config configs/demo/demo_features_img.yaml [--force] [--skip-bad] [k=v ...]``

Each batch is pooled, cast to the file's dtype on the device, and written by a background thread while the
next batch computes (``RowWriter``), then ``n_done`` is advanced: memory does not grow with N, and a rerun
after a kill continues from the last flushed batch.

No empty dump at the final path. A new dump is created as ``feats.h5.partial`` (``h5io.partial_path``)
and renamed to ``feats.h5`` right after its first batch is committed. So a dump that fails before
writing any image (its first image does not decode, a crash, a kill) leaves no ``feats.h5`` behind:
an error removes the ``.partial``, a kill leaves a ``.partial`` that the next run overwrites (it
holds no committed row, so there is nothing to resume) and that ``verify`` names as a partial dump.
Chosen over "create ``feats.h5``, delete it on error" because a kill runs no clean-up code, and over
"rename only when complete" because an interrupted long dump must stay resumable at the path the
user and ``verify`` know (``feats.h5`` with ``complete`` false, a partial dump of ``n_done`` images).
"""
from __future__ import annotations

import argparse
import contextlib
import os
import shlex
import sys
import time
from pathlib import Path

import h5py
import numpy as np
import torch
import torch.nn.functional as F
from tqdm import tqdm

from capcore.cpu_isa import cpu_isa
from capcore.device import pick_device
from capcore.errors import CapawareError
from capdata.captions import DEFAULT as DEFAULT_FORMAT
from capdata.images import check_images_exist
from embedder.backbones import IMAGENET_NORM
from feature_extract import h5io
from feature_extract.backbone import load_backbone
from feature_extract.row_labels import label_of
from feature_extract.config import load_features_config
from feature_extract.oracle import check_existing, write_oracle
from feature_extract.sources import ImageDataset, collate, list_images
from feature_extract.verify import main as verify_main

AUTOCAST = {"bfloat16": torch.bfloat16, "float16": torch.float16}


def resolve_precision(precision: str, device: torch.device, native_bf16: bool | None = None) -> str:
    """``auto``: bfloat16 autocast where it is native (tensor-core speed, float32's exponent range so no
    overflow in deep activations): a GPU from Ampere on, or a CPU with AVX-512 BF16 or AMX
    (``capcore.cpu_isa``); float32 on other CPUs, where bfloat16 is emulated and about 12x slower.
    A GPU without native bfloat16 (before Ampere) gets float16. Other values pass through; the
    resolved value is what the file's ``precision`` attr records, so a dump begun on one machine is
    not silently resumed at another precision on another."""
    if precision != "auto":
        return precision
    if device.type != "cuda":
        native = cpu_isa().bfloat16_native if native_bf16 is None else native_bf16
        return "bfloat16" if native else "float32"
    if native_bf16 is None:
        native_bf16 = torch.cuda.get_device_capability(device) >= (8, 0)
    return "bfloat16" if native_bf16 else "float16"


def pool(fmap: torch.Tensor, att_size: int) -> tuple[torch.Tensor, torch.Tensor]:
    """layer4 [B, C, h, w] -> att [B, att_size^2, C] (adaptive average pool, H then W, C last), fc [B, C]."""
    fmap = fmap.float()
    att = F.adaptive_avg_pool2d(fmap, att_size).permute(0, 2, 3, 1).reshape(fmap.shape[0], -1, fmap.shape[1])
    return att, fmap.mean((2, 3))


class Extractor:
    """The backbone plus the per-batch transform: uint8 HWC images -> att, fc (on CPU, in the file's dtype)."""

    def __init__(self, model: torch.nn.Module, device: torch.device, att_size: int, precision: str,
                 channels_last: bool):
        precision = resolve_precision(precision, device)
        if precision == "float16" and device.type != "cuda":
            raise CapawareError("precision", "float16 compute needs a GPU", "use precision=bfloat16 or float32 on CPU")
        self.memory_format = torch.channels_last if channels_last else torch.contiguous_format
        self.model = model.to(device).to(memory_format=self.memory_format)
        self.device, self.att_size, self.precision = device, att_size, precision
        mean, std = getattr(model, "norm", IMAGENET_NORM)  # the backbone's own mean and std
        self.mean, self.std = (torch.tensor(v).view(1, 3, 1, 1).to(device) for v in (mean, std))

    @torch.inference_mode()
    def __call__(self, images: list[torch.Tensor],
                 dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, torch.Tensor]:
        """att, fc in ``dtype`` (the file's), cast on the device: the host only copies the bytes out."""
        # Stacking HWC gives NHWC memory: permuting to NCHW is then channels_last for free.
        x = torch.stack(images).to(self.device, non_blocking=True).permute(0, 3, 1, 2)
        x = ((x.float() / 255.0 - self.mean) / self.std).contiguous(memory_format=self.memory_format)
        cast = (torch.autocast(self.device.type, dtype=AUTOCAST[self.precision])
                if self.precision in AUTOCAST else contextlib.nullcontext())
        with cast:
            fmap, vector = self.model.features_and_vector(x)
        att, fc = pool(fmap, self.att_size)
        if vector is not None:  # a ViT's class token (or its model's own pooling), not the map's mean
            fc = vector.float()
        return att.to(dtype).cpu(), fc.to(dtype).cpu()


def run_batch(extract: Extractor, items, skip_bad: bool, c: int, hw: int, dtype: torch.dtype = torch.float32):
    """att [B, hw, c], fc [B, c] (``dtype``; zeros for skipped rows) and the skipped mask, in row order.

    Images of equal shape share one forward (all of them under the square policy).
    """
    att, fc = torch.zeros(len(items), hw, c, dtype=dtype), torch.zeros(len(items), c, dtype=dtype)
    skipped = np.zeros(len(items), bool)
    groups: dict[tuple, list[int]] = {}
    for k, (_, image, error) in enumerate(items):
        if error:
            if not skip_bad:
                where, problem, fix = error
                raise CapawareError(where, problem, f"{fix}; or rerun with --skip-bad to record it as skipped")
            skipped[k] = True
            continue
        groups.setdefault(tuple(image.shape), []).append(k)
    for ks in groups.values():
        a, f = extract([items[k][1] for k in ks], dtype)
        att[ks], fc[ks] = a, f
    return att, fc, skipped


def identity_attrs(cfg, info, images, channels: int, precision: str | None = None) -> dict:
    """What the numbers depend on; ``precision`` is the resolved one (``auto`` names no dtype)."""
    return {"format": h5io.FORMAT, **info.attrs(), "input_policy": cfg.input.policy,
            "input_size": int(cfg.input.size), "att_size": int(cfg.att_size), "channels": int(channels),
            "dtype": cfg.dtype, "compression": cfg.compression, "precision": precision or cfg.precision,
            "images": images.source, "image_root": images.root, "splits": h5io.splits_attr(cfg.images.splits),
            "images_sha256": images.sha256(), "n_images": len(images),
            **({"images_format": cfg.images.format} if cfg.images.format != DEFAULT_FORMAT else {})}


def dump(cfg, command: str, force: bool = False, progress: bool = True) -> dict:
    """Write (or resume, or find complete) ``cfg.out``; return a summary dict."""
    out = Path(cfg.out)
    images = list_images(cfg.images)
    if not cfg.skip_bad:
        check_images_exist(images.paths)  # a missing file stops the run now, not hours in
    model, info = load_backbone(cfg.backbone)
    device = pick_device(cfg.device)
    extract = Extractor(model, device, cfg.att_size, cfg.precision, cfg.channels_last)
    n, hw, c = len(images), cfg.att_size ** 2, model.width
    attrs = identity_attrs(cfg, info, images, c, precision=extract.precision)
    partial = h5io.partial_path(out)
    if force:
        out.unlink(missing_ok=True)
        partial.unlink(missing_ok=True)
    if out.exists():
        f = h5io.open_for_resume(out, attrs)
        if f is None:
            with h5py.File(out, "r") as g:
                n_skipped = int(g.attrs["n_skipped"])
            return {"out": out, "status": "already complete (--force to redo)", "n": n, "done_now": 0,
                    "skipped": n_skipped, "channels": c, "label": label_of(info.kind, cfg.label), "seconds": 0.0,
                    "compute": f"{device.type} {extract.precision}"}
        start, n_skipped = int(f.attrs["n_done"]), int(f.attrs["n_skipped"])
        f.close()
    else:  # a leftover .partial committed no row: start over (create replaces it atomically)
        h5io.create(partial, {**attrs, "command": command, **({"label": cfg.label} if cfg.label else {})},
                    images.ids, images.names)
        start, n_skipped = 0, 0
    try:
        return _fill(cfg, out, partial if start == 0 else out, images, extract, info, device, start,
                     n_skipped, c, hw, progress)
    except BaseException:
        partial.unlink(missing_ok=True)  # still there: no batch was committed, nothing to resume
        raise


class RowWriter:
    """Commits batches to the dump from a background thread, in order, one behind the network: batch b is
    written (rows, flush, then ``n_done``) while batch b + 1 computes. The first committed batch renames the
    ``.partial`` to the final path. ``submit`` waits for the previous batch, so at most one is in flight and an
    error in writing surfaces at the next batch (or at ``close``)."""

    def __init__(self, out: Path, path: Path, n_skipped: int, stop_after: int | None):
        from concurrent.futures import ThreadPoolExecutor

        self.out, self.path, self.n_skipped, self.stop_after = out, path, n_skipped, stop_after
        self.f = h5py.File(path, "r+")
        self.pool, self.pending = ThreadPoolExecutor(max_workers=1, thread_name_prefix="feats-writer"), None

    def submit(self, b: int, lo: int, hi: int, att: torch.Tensor, fc: torch.Tensor, skipped: np.ndarray) -> None:
        self.wait()
        self.pending = self.pool.submit(self._commit, b, lo, hi, att.numpy(), fc.numpy(), skipped)

    def wait(self) -> None:
        if self.pending is not None:
            self.pending.result()
            self.pending = None

    def _commit(self, b: int, lo: int, hi: int, att: np.ndarray, fc: np.ndarray, skipped: np.ndarray) -> None:
        f = self.f
        f["att"][lo:hi] = att
        f["fc"][lo:hi] = fc
        f["skipped"][lo:hi] = skipped
        f.flush()  # the rows reach the file before n_done claims them
        if self.stop_after is not None and b >= self.stop_after:
            os._exit(3)  # testing aid: killed after this batch's rows were written, before n_done
        self.n_skipped += int(skipped.sum())
        f.attrs["n_skipped"] = self.n_skipped
        f.attrs["n_done"] = hi
        f.flush()
        if self.path != self.out:  # the first committed batch: the dump now holds something valid
            f.close()
            os.replace(self.path, self.out)
            self.path, self.f = self.out, h5py.File(self.out, "r+")

    def close(self, complete: bool) -> None:
        try:
            self.wait()
            if complete:
                self.f.attrs["complete"] = True
        finally:
            self.pool.shutdown(wait=True)
            self.f.close()


def _fill(cfg, out: Path, path: Path, images, extract, info, device, start: int, n_skipped: int, c: int,
          hw: int, progress: bool) -> dict:
    """Rows ``start`` .. N, batch by batch, into ``path``; ``n_done`` advances after each flushed batch.

    ``path`` is ``out`` (a resume) or its ``.partial``, renamed to ``out`` once the first batch is in.
    """
    n = len(images)
    loader = torch.utils.data.DataLoader(
        ImageDataset(images, range(start, n), cfg.input.policy, cfg.input.size), batch_size=cfg.batch_size,
        num_workers=cfg.num_workers, collate_fn=collate, pin_memory=device.type == "cuda",
        prefetch_factor=2 if cfg.num_workers else None)
    dtype = getattr(torch, np.dtype(cfg.dtype).name)
    t0 = time.perf_counter()
    batches = iter(loader)  # workers fork before the file is opened: they must never hold its handle
    bar = tqdm(total=n, initial=start, desc=f"features {out.name}", unit="img", disable=not progress,
               leave=False)
    writer, complete = RowWriter(out, path, n_skipped, cfg.stop_after_batches), False
    try:
        for b, items in enumerate(batches):
            lo, hi = items[0][0], items[-1][0] + 1
            att, fc, skipped = run_batch(extract, items, cfg.skip_bad, c, hw, dtype)
            writer.submit(b, lo, hi, att, fc, skipped)
            bar.update(hi - lo)
        complete = True
    finally:
        writer.close(complete)
    bar.close()
    seconds = time.perf_counter() - t0
    return {"out": out, "status": "resumed" if start else "written", "n": n, "done_now": n - start,
            "skipped": writer.n_skipped, "label": label_of(info.kind, cfg.label), "seconds": seconds, "channels": c,
            "compute": f"{device.type} {extract.precision}"}


def summary(result: dict, cfg) -> str:
    out = result["out"]
    lines = [f"features -> {out} ({result['status']})",
             f"  backbone  {cfg.backbone.checkpoint} -> row label {result['label']}",
             f"  images    {result['n']} ({result.get('skipped', 0)} skipped)",
             f"  att       [{result['n']}, {cfg.att_size ** 2}, {result['channels']}] {cfg.dtype}, "
             f"input {cfg.input.policy} {cfg.input.size}, compression {cfg.compression}",
             f"  compute   {result.get('compute', cfg.precision)}",
             f"  size      {out.stat().st_size / 2**20:.2f} MiB"]
    if result["done_now"]:
        rate = result["done_now"] / max(result["seconds"], 1e-9)
        lines.append(f"  speed     {result['done_now']} images in {result['seconds']:.1f} s ({rate:.1f} img/s)")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--force", action="store_true", help="delete an existing output file and start over")
    parser.add_argument("--skip-bad", action="store_true", help="record undecodable images as skipped")
    parser.add_argument("--verify", action="store_true", help="then check the file (python -m feature_extract.verify, "
                        "with the config's Karpathy json when it names one), in this process")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    argv = sys.argv[1:] if argv is None else argv
    args = parser.parse_args(argv)
    cfg = load_features_config(args.config, args.overrides, note_renamed=True)
    if args.skip_bad:
        cfg.skip_bad = True
    command = " ".join(shlex.quote(a) for a in ["python", "-m", "feature_extract", *argv])
    if cfg.backbone.checkpoint == "oracle":  # the scene files themselves (feature_extract.oracle), no network
        if not cfg.images.captions:
            raise CapawareError(args.config, "backbone.checkpoint: oracle needs images.captions",
                                "name the synthetic set's dataset_coco.json in images.captions")
        if Path(cfg.out).is_file() and not args.force:
            check_existing(cfg.out, cfg.images.captions, cfg.att_size)
            print(f"features -> {cfg.out} (already complete (--force to redo))")
        else:
            print(f"features -> {write_oracle(cfg.images.captions, cfg.out, cfg.att_size, command)} (oracle, "
                  f"{cfg.att_size} x {cfg.att_size} grid)")
        args.verify and verify_main([cfg.out, "--images", cfg.images.captions])
        return
    print(summary(dump(cfg, command, force=args.force), cfg))
    if args.verify:
        verify_main([cfg.out] + (["--images", cfg.images.captions] if cfg.images.captions else []))
