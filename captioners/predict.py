"""Caption a split: ``python -m captioners.predict --checkpoint best.pt --split test --out preds.json``.

Written files::

    preds.json       COCO results format: [{"image_id": int, "caption": str}, ...] in the split's order
    preds.meta.json  {"checkpoint", "config_hash", "core", "stage" (xe | rl: the checkpoint's, xe when
                      absent), "split", "method", "beam_size", "temperature", "features", "n_images",
                      "command", "scst_signature" (rl/signature.py; null for XE)}: eval.score_captions copies
                      config_hash and scst_signature from it; eval.reporting.results_table reads core, stage and
                      the features file (whose backbone attribute says Img / Cap)
    --attention A.h5 (optional) image_id [N] int64, seq [N, T] int32 (0 after the end),
                     alpha [N, T, H*W] float16 (the attention that produced word t), caption [N] str;
                     attrs grid_h, grid_w, checkpoint, method, beam_size. Read by eval.attention_maps.

Features and labels default to the files the checkpoint was trained on; ``--features`` decodes other
features (same backbone), ``--split all`` with ``--no-labels`` decodes every image of a features file.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from pathlib import Path

import h5py
import numpy as np
import torch

from capcore.atomic import atomic_path, write_text
from capcore.device import pick_device
from capcore.errors import CapawareError, run_cli
from captioners.data import CaptionDataset
from captioners.decoding import METHODS
from captioners.model import load_captioner
from captioners.prepro import read_labels
from captioners.validation import generate


def meta_path(preds: str | Path) -> Path:
    preds = Path(preds)
    return preds.with_name(preds.stem + ".meta.json")


def write_attention(path: Path, rows, grid, attrs: dict) -> None:
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("image_id", data=np.array([r[0] for r in rows], dtype=np.int64))
            f.create_dataset("seq", data=np.stack([r[1] for r in rows]).astype(np.int32))
            f.create_dataset("alpha", data=np.stack([r[2] for r in rows]).astype(np.float16))
            f.create_dataset("caption", data=[r[3] for r in rows], dtype=h5py.string_dtype())
            f.attrs.update(grid_h=int(grid[0]), grid_w=int(grid[1]), **attrs)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True, help="best.pt of captioners.xe")
    parser.add_argument("--split", default="test", help="train | val | test | all (default test)")
    parser.add_argument("--out", required=True, help="COCO results JSON to write")
    parser.add_argument("--method", default="beam", choices=METHODS)
    parser.add_argument("--beam-size", type=int, default=2, help="beam width (default 2; 1 = greedy)")
    parser.add_argument("--temperature", type=float, default=1.0, help="sampling temperature (--method sample)")
    parser.add_argument("--seed", type=int, default=0, help="sampling seed")
    parser.add_argument("--max-length", type=int, default=None, help="words per caption (default: training's)")
    parser.add_argument("--features", default=None, help="feats.h5 (default: the training features)")
    parser.add_argument("--labels", default=None, help="labels.h5 giving the split (default: training's)")
    parser.add_argument("--no-labels", action="store_true", help="caption every image of --features (split all)")
    parser.add_argument("--max-images", type=int, default=None, help="first N images of the split")
    parser.add_argument("--batch-size", type=int, default=50)
    parser.add_argument("--attention", default=None, help="also write per-word attention weights to this .h5")
    parser.add_argument("--device", default="auto")
    parser.add_argument("--no-progress", action="store_true")
    a = parser.parse_args(argv)
    if a.beam_size < 1 or a.batch_size < 1 or a.temperature <= 0:
        raise CapawareError("command line", "--beam-size and --batch-size must be >= 1, --temperature > 0",
                            "e.g. --beam-size 2 --temperature 1.0")

    device = pick_device(a.device)
    model, card = load_captioner(a.checkpoint, device)
    feats = a.features or card.features
    labels = None if a.no_labels else read_labels(a.labels or card.labels)
    split = "all" if a.no_labels else a.split
    dataset = CaptionDataset(feats, labels, split, in_memory=False, max_images=a.max_images)
    info = dataset.info
    expect = card.feature_sizes
    if (info.fc_dim, info.att_shape[1]) != expect:
        raise CapawareError(feats, f"feature sizes fc {info.fc_dim}, att {info.att_shape[1]} do not fit the "
                            f"checkpoint (fc {expect[0]}, att {expect[1]})", "use features of the same backbone")
    max_len = a.max_length or int(card.max_length)
    generator = torch.Generator(device=device).manual_seed(a.seed)
    preds, attention = generate(model, dataset, list(card.vocab), device, a.batch_size, max_len, a.method,
                                a.beam_size, a.temperature, generator, keep_attention=bool(a.attention),
                                progress=not a.no_progress)
    results = [{"image_id": int(i), "caption": preds[int(i)]} for i in dataset.image_ids]
    write_text(a.out, "[\n" + ",\n".join(json.dumps(r) for r in results) + "\n]\n")  # one caption per line
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "captioners.predict", *(argv or sys.argv[1:])])
    meta = {"checkpoint": str(Path(a.checkpoint).resolve()), "config_hash": card.config_hash,
            "core": card.core, "stage": card.stage, "split": split,
            "method": a.method, "beam_size": a.beam_size, "temperature": a.temperature,
            "features": str(Path(feats).resolve()), "n_images": len(results), "command": command,
            "scst_signature": card.scst_signature}
    write_text(meta_path(a.out), json.dumps(meta, indent=1))
    if a.attention:
        rows = [(i, s, al, preds[i]) for i, s, al in attention]
        write_attention(Path(a.attention), rows, info.grid,
                        {"checkpoint": meta["checkpoint"], "method": a.method, "beam_size": a.beam_size})
    sample = results[0]
    print(f"decode: {len(results)} {split} captions ({a.method}"
          f"{f', beam {a.beam_size}' if a.method == 'beam' else ''}) -> {a.out}; "
          f"e.g. {sample['image_id']}: {sample['caption']!r}")


if __name__ == "__main__":
    run_cli(main)
