"""Stage-one training of one loss + mining method: ``python -m embedder.train --config FILE [k=v ...]``.

One screen of loop (nanoGPT style): seeded sampler -> images -> embeddings -> label distances of the
batch -> mined triplets -> loss -> SGD. Checkpoints are atomic and carry the sampler position and RNG
states, so a killed run resumes to the same weights as an uninterrupted one.
"""
from __future__ import annotations

import argparse
import math
import os
import re
from pathlib import Path

import numpy as np
import torch
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from embedder.checkpoint import load_checkpoint, save_checkpoint
from embedder.config import config_hash, load_config
from embedder.data import normalise
from embedder.device import pick_device
from embedder.errors import CapawareError, run_cli
from embedder.losses.log_ratio import log_ratio_loss
from embedder.losses.margin import MarginLoss
from embedder.losses.triplet import triplet_loss
from embedder.mining import binary_triplet_mask, dense_triplet_mask
from embedder.model import build_model
from embedder.sampler import AnchorBatchSampler

LOSSES = ("log_ratio", "triplet", "margin")
MININGS = ("dense", "binary")


def slug(name: str) -> str:
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


class MethodLoss(torch.nn.Module):
    """Dispatch a method (loss, mining, margin) onto the pure loss functions."""

    def __init__(self, method, positives: int, eps: float, seed: int):
        super().__init__()
        if method.loss not in LOSSES or method.mining not in MININGS:
            raise CapawareError("method", f"unknown loss/mining {method.loss!r}/{method.mining!r}",
                                f"loss in {LOSSES}, mining in {MININGS}")
        self.method, self.positives, self.eps = method, positives, eps
        self.margin_loss = MarginLoss(margin=method.margin) if method.loss == "margin" else None
        self.generator = torch.Generator().manual_seed(seed)

    @property
    def normalised(self) -> bool:
        """Triplet and margin losses train L2-normalised embeddings, so retrieval uses them too."""
        return self.method.loss != "log_ratio"

    def forward(self, emb, anchors, label_dist, positive):
        m = self.method
        if m.loss == "log_ratio":
            return log_ratio_loss(emb, anchors, label_dist, eps=self.eps)
        if m.loss == "margin":
            return self.margin_loss(emb, anchors, positive, generator=self.generator)
        mask = dense_triplet_mask(anchors, label_dist) if m.mining == "dense" else binary_triplet_mask(anchors, positive)
        return triplet_loss(emb, anchors, mask, margin=m.margin)


def positive_mask(graph_idx: np.ndarray, items: np.ndarray, anchors: np.ndarray, positives: int) -> torch.Tensor:
    """[A, B]: batch member is among the anchor's ``positives`` label-nearest training items."""
    near = graph_idx[items[anchors], :positives]  # [A, P]
    return torch.from_numpy((items[None, :, None] == near[:, None, :]).any(-1))


def run_fingerprint(cfg, method) -> str:
    """What determines the weights: everything but bookkeeping (where to write, how often to log)."""
    from omegaconf import OmegaConf

    c = OmegaConf.to_container(cfg)
    for key in ("stop_after_steps", "ckpt_every", "log_every"):
        c["train"].pop(key, None)
    for key in ("out_dir", "methods", "dims", "method", "eval", "name"):
        c.pop(key, None)
    return config_hash(OmegaConf.create(c)) + ":" + str(method)


class StepBatches(torch.utils.data.Dataset):
    """Item n = everything step ``start + n`` needs: images, anchors, label distances, positives.

    Batches are a pure function of the step (sampler), so DataLoader workers can decode images and
    compute label distances (WMD for captions: the expensive part) ahead of the training loop.
    """

    def __init__(self, sampler: AnchorBatchSampler, bank, space, nn_idx: np.ndarray, positives: int,
                 start: int, total: int):
        self.sampler, self.bank, self.space, self.nn_idx = sampler, bank, space, nn_idx
        self.positives, self.start, self.total = positives, start, total

    def __len__(self) -> int:
        return self.total - self.start

    def __getitem__(self, n: int):
        epoch, s = divmod(self.start + n, self.sampler.steps_per_epoch())
        b = self.sampler.batch(epoch, s)
        label_dist = self.space.pairwise(b.items[b.anchors], b.items)
        return (self.bank.uint8(b.items), torch.from_numpy(b.anchors), torch.from_numpy(label_dist),
                positive_mask(self.nn_idx, b.items, b.anchors, self.positives))


def train_method(cfg, method, out_dir: Path, bank, space, nn_idx: np.ndarray, progress: bool = True) -> Path:
    """Train ``method`` on the images in ``bank`` (labels ``space``, graph ``nn_idx``); return model.pt."""
    out_dir = Path(out_dir)
    final = out_dir / "model.pt"
    if final.is_file():
        if load_checkpoint(final).get("fingerprint") != run_fingerprint(cfg, method):
            raise CapawareError(final, "a finished run of another config or method is in the way",
                                f"delete {out_dir} to retrain, or choose another out_dir")
        return final
    t = cfg.train
    dim = method.embed_dim or cfg.model.embed_dim
    device = pick_device(cfg.device)
    torch.manual_seed(cfg.seed)
    model = build_model(cfg.model.arch, dim, cfg.model.init, cfg.model.weights).to(device).to(
        memory_format=torch.channels_last)
    criterion = MethodLoss(method, t.positives, t.log_ratio_eps, cfg.seed).to(device)
    params = list(model.parameters()) + list(criterion.parameters())
    lr = method.lr if method.lr is not None else t.lr
    if t.precision not in ("float32", "bfloat16"):
        raise CapawareError("train.precision", f"unknown precision {t.precision!r}", "use float32 or bfloat16")
    if t.optimizer == "sgd":
        opt = torch.optim.SGD(params, lr=lr, momentum=t.momentum, weight_decay=t.weight_decay)
    elif t.optimizer == "adam":
        opt = torch.optim.Adam(params, lr=lr, weight_decay=t.weight_decay)
    else:
        raise CapawareError("train.optimizer", f"unknown optimizer {t.optimizer!r}", "use sgd or adam")
    sampler = AnchorBatchSampler(nn_idx, t.batch_size, t.k, t.anchors_per_batch, cfg.seed)
    per_epoch = sampler.steps_per_epoch()
    total = max(1, math.ceil(t.epochs * per_epoch))
    sched = torch.optim.lr_scheduler.LambdaLR(opt, lambda s: t.lr_decay ** (s / per_epoch))

    ckpt_path, fingerprint = out_dir / "last.pt", run_fingerprint(cfg, method)
    step = 0
    if ckpt_path.is_file():
        state = load_checkpoint(ckpt_path)
        if state["fingerprint"] != fingerprint:
            raise CapawareError(ckpt_path, "checkpoint belongs to another config or method",
                                "delete the run folder or choose another out_dir")
        model.load_state_dict(state["model"])
        criterion.load_state_dict(state["criterion"])
        opt.load_state_dict(state["optimizer"])
        sched.load_state_dict(state["scheduler"])
        criterion.generator.set_state(state["loss_rng"])
        torch.set_rng_state(state["torch_rng"])
        step = int(state["step"])

    def checkpoint(path: Path, done: bool) -> None:
        save_checkpoint({"model": model.state_dict(), "criterion": criterion.state_dict(),
                         "optimizer": opt.state_dict(), "scheduler": sched.state_dict(),
                         "loss_rng": criterion.generator.get_state(), "torch_rng": torch.get_rng_state(),
                         "step": step, "fingerprint": fingerprint, "arch": cfg.model.arch,
                         "embed_dim": dim, "normalised": criterion.normalised, "method": method.name,
                         "done": done}, path)

    writer = SummaryWriter(str(out_dir / "tb"), purge_step=step)
    model.train()
    bar = tqdm(total=total, initial=step, desc=method.name, disable=not progress, leave=False)
    workers = cfg.data.num_workers
    loader = torch.utils.data.DataLoader(
        StepBatches(sampler, bank, space, nn_idx, t.positives, step, total), batch_size=None,
        shuffle=False, num_workers=workers, persistent_workers=False, prefetch_factor=2 if workers else None)
    for images, anchors, label_dist, positive in loader:
        with torch.autocast(device.type, dtype=torch.bfloat16, enabled=t.precision == "bfloat16"):
            features = model.trunk(normalise(images, device))
        emb = model.head(features.float())  # head and loss in float32: the log-ratio needs precise distances
        loss = criterion(emb, anchors.to(device), label_dist.to(device), positive.to(device))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()
        sched.step()
        step += 1
        bar.update(1)
        if step % t.log_every == 0 or step == total:
            writer.add_scalar("train/loss", loss.item(), step)
            writer.add_scalar("train/lr", sched.get_last_lr()[0], step)
            bar.set_postfix(loss=f"{loss.item():.4f}")
        if step % t.ckpt_every == 0 or step == total:
            checkpoint(ckpt_path, done=step == total)
        if t.stop_after_steps is not None and step >= t.stop_after_steps and step < total:
            checkpoint(ckpt_path, done=False)
            writer.close()
            os._exit(3)  # simulate a kill: no cleanup, no final file
    bar.close()
    writer.close()
    checkpoint(final, done=True)
    ckpt_path.unlink(missing_ok=True)
    return final


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    from embedder.study import prepare_track

    track = prepare_track(cfg)
    out = train_method(cfg, cfg.method, Path(cfg.out_dir) / "methods" / slug(cfg.method.name),
                       track.train_bank, track.train_space, track.graph.nn_idx)
    print(f"stage one: {cfg.method.name} -> {out}")


if __name__ == "__main__":
    run_cli(main)
