"""Class-pretrained backbone: multi-label classification on the shapes-captions object categories.

In the embedded default this plays ImageNet's part twice, as in the paper: the initialisation of the
caption-aware embedder, and the "Img" feature baseline of stages two and three. Same checkpoint
layout as stage one (``trunk.*`` weights), so ``model.init=<path>`` and feature extraction load it.
``python -m embedder.pretrain --config configs/demo_caption.yaml``
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from embedder.checkpoint import load_checkpoint, save_checkpoint
from embedder.config import config_hash, load_config
from embedder.data import ImageBank, read_records, split_records
from embedder.device import pick_device
from embedder.errors import CapawareError, run_cli
from embedder.model import Embedder, build_model


def category_targets(records, names: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """[N, C] multi-hot targets over ``names`` (default: the sorted categories of ``records``)."""
    if records.categories is None:
        raise CapawareError("data.root", "the caption set has no per-image 'categories'",
                            "class pretraining needs them: use the synthetic shapes-captions set, or "
                            "model.init=imagenet with real COCO")
    names = names or sorted({c for cats in records.categories for c in cats})
    lookup = {c: i for i, c in enumerate(names)}
    targets = np.zeros((len(records), len(names)), np.float32)
    for row, cats in enumerate(records.categories):
        targets[row, [lookup[c] for c in cats]] = 1.0
    return targets, names


def pretrain(cfg, out_dir: Path, bank: ImageBank, targets: np.ndarray, progress: bool = True) -> Path:
    """Train trunk + a linear multi-label classifier (BCE); return the checkpoint path."""
    out_dir = Path(out_dir)
    final = out_dir / "model.pt"
    if final.is_file():
        return final
    p = cfg.pretrain
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model = Embedder(cfg.model.arch, targets.shape[1]).to(device).to(memory_format=torch.channels_last)
    opt = torch.optim.Adam(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    per_epoch = math.ceil(len(bank) / p.batch_size)
    total = max(1, math.ceil(p.epochs * per_epoch))
    ckpt, fingerprint, step = out_dir / "last.pt", config_hash(cfg.pretrain) + cfg.model.arch, 0
    if ckpt.is_file():
        state = load_checkpoint(ckpt)
        if state["fingerprint"] == fingerprint:
            model.load_state_dict(state["model"])
            opt.load_state_dict(state["optimizer"])
            step = int(state["step"])
    y = torch.from_numpy(targets)
    writer = SummaryWriter(str(out_dir / "tb"), purge_step=step + 1)  # scalars at ``step`` came before its checkpoint
    model.train()
    for step in tqdm(range(step, total), initial=step, total=total, desc="class pretraining",
                     disable=not progress, leave=False):
        epoch, s = divmod(step, per_epoch)
        order = np.random.default_rng([cfg.seed, epoch]).permutation(len(bank))
        index = order[s * p.batch_size:(s + 1) * p.batch_size]
        logits = model(bank.batch(index, device))
        loss = torch.nn.functional.binary_cross_entropy_with_logits(logits, y[index].to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        if (step + 1) % 10 == 0:
            writer.add_scalar("pretrain/bce", loss.item(), step + 1)
        if (step + 1) % p.ckpt_every == 0:
            save_checkpoint({"model": model.state_dict(), "optimizer": opt.state_dict(), "step": step + 1,
                             "fingerprint": fingerprint}, ckpt)
    writer.close()
    save_checkpoint({"model": model.state_dict(), "arch": cfg.model.arch, "embed_dim": targets.shape[1],
                     "kind": "class-pretrained", "step": total, "normalised": False}, final)
    ckpt.unlink(missing_ok=True)
    return final


def accuracy(cfg, checkpoint: Path, bank: ImageBank, targets: np.ndarray) -> float:
    """Exact-set accuracy (all categories right) on a held-out split: proof the backbone learned."""
    state = load_checkpoint(checkpoint)
    model = build_model(cfg.model.arch, targets.shape[1])
    model.load_state_dict(state["model"])
    model.eval()
    preds = []
    with torch.inference_mode():
        for start in range(0, len(bank), 128):
            preds.append(model(bank.batch(np.arange(start, min(start + 128, len(bank))))) > 0)
    return float((torch.cat(preds).numpy() == (targets > 0.5)).all(1).mean())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    records = read_records(cfg.data)
    train = split_records(records, ("train", "restval"))
    targets, names = category_targets(train)
    bank = ImageBank.build(train, cfg.data.input_size, cfg.data.in_memory, desc="train images")
    out = pretrain(cfg, Path(cfg.out_dir) / "class_pretrained", bank, targets)
    test = split_records(records, "test")
    t_targets, _ = category_targets(test, names)
    acc = accuracy(cfg, out, ImageBank.build(test, cfg.data.input_size, True, desc="test images"), t_targets)
    print(f"class-pretrained backbone -> {out} (test exact-set accuracy {acc:.3f} over {len(names)} categories)")


if __name__ == "__main__":
    run_cli(main)
