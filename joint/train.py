"""Training of the joint space (Liu et al. 2018's self-retrieval module, trained as fartashf/vsepp trains it):
``python -m capaware.stage joint CONFIG [key=value ...]``.

Each epoch takes every train image once, in a seeded order, with one of its own captions drawn at random (the
draw seeded by the seed and the epoch, so a resumed run draws the same); a batch's other images and captions are
its negatives under the configured loss (joint.losses.registry). Adam, the gradient norm clipped, float32. After
each epoch the val split's rsum (joint.recall) is computed and the best epoch kept as ``best.pt``; at the end the
test split is scored with ``best.pt``: i2t and t2i R@1/5/10, medr, meanr and rsum, on the full set and in 1K folds
when it has that many images, into ``results/joint/<run>.json`` and ``.md``. Files under ``out_dir``::

    best.pt       weights + the card (joint.card: features and vocabulary it was trained on) at the best val rsum
    last.pt       resumable state: model, Adam, the loss (its warm-up counter), torch's RNG, step, history
    history.json  per epoch: step, mean train loss, val R@K and rsum;  config.yaml;  tb/  TensorBoard scalars

A kill (or ``train.stop_after_steps``, capcore.harness) loses only the steps after the last checkpoint; the
resumed run ends with the weights and numbers of an unbroken one.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from capcore.atomic import write_text
from capcore.checkpoint import load_checkpoint, save_checkpoint
from capcore.config import config_hash
from capcore.device import pick_device
from capcore.distributed import summary_writer
from capcore.fingerprint import run_fingerprint
from capcore.harness import LoopCheckpoint, StopRequested, asked_to_stop
from capcore.optim import adam
from joint import recall
from joint.card import JointCard
from joint.config import JointConfig, features_path, loss_args, results_paths
from joint.data import JointSplit, features_identity, load_split, prepro_files, read_vocabulary
from joint.losses.registry import build_loss
from joint.model import JointSpace

__all__ = ["train", "StopRequested", "results_paths"]


def epoch_order(split: JointSplit, batch_size: int, seed: int, epoch: int) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """The epoch's batches: (image indexes, one caption index of each), a function of seed and epoch alone."""
    g = torch.Generator().manual_seed(seed * 1_000_003 + epoch)
    images = torch.randperm(len(split.feats), generator=g)
    counts = torch.bincount(split.owner, minlength=len(split.feats))
    first = torch.cumsum(counts, 0) - counts  # captions are grouped by image, in image order (joint.data)
    pick = first[images] + (torch.rand(len(images), generator=g) * counts[images]).long()
    return [(images[i:i + batch_size], pick[i:i + batch_size]) for i in range(0, len(images), batch_size)]


@torch.no_grad()
def embed(model: JointSpace, split: JointSplit, device: torch.device, chunk: int = 512):
    """(image embeddings, caption embeddings) of a whole split, in eval mode."""
    model.eval()
    img = torch.cat([model.embed_images(split.feats[i:i + chunk].to(device)) for i in range(0, len(split.feats),
                                                                                           chunk)])
    txt = torch.cat([model.embed_captions(split.captions[i:i + chunk].to(device))
                     for i in range(0, len(split.captions), chunk)])
    return img.cpu(), txt.cpu()


class JointRun:
    """A run's parts (data, model, loss, Adam, card, last.pt) and the helpers of its loop."""

    def __init__(self, cfg: JointConfig):
        self.cfg, self.device, d = cfg, pick_device(cfg.device), cfg.data
        labels, vocab_json = prepro_files(d.prepro_dir)
        feats = features_path(d)
        self.train_set = load_split(feats, labels, "train", d.source)
        self.val_set = load_split(feats, labels, cfg.eval.val_split, d.source)
        self.test_args = (feats, labels, cfg.eval.test_split, d.source)
        vocab, feats_sha = read_vocabulary(vocab_json), features_identity(feats)
        torch.manual_seed(cfg.seed)
        m = cfg.model
        self.model = JointSpace(vocab.size, self.train_set.feat_dim, m.embed_dim, m.word_dim, d.source,
                                m.num_layers).to(self.device)
        self.loss = build_loss(cfg.loss.name, loss_args(cfg)).to(self.device)
        self.opt = adam(self.model.parameters(), fused=False, lr=cfg.train.lr)
        fingerprint = run_fingerprint(cfg, {"features_sha256": feats_sha, "vocab_sha256": vocab.sha256})
        self.card = JointCard(self.model.args, str(feats.resolve()), feats_sha, str(labels.resolve()), vocab.path,
                              vocab.size, vocab.sha256, cfg.loss.name, OmegaConf.to_yaml(cfg, resolve=True),
                              config_hash(cfg), fingerprint, "float32")
        self.out = Path(cfg.out_dir)
        self.per_epoch = -(-len(self.train_set.feats) // cfg.train.batch_size)
        self.total = cfg.train.epochs * self.per_epoch
        self.last = LoopCheckpoint(self.out / "last.pt", fingerprint,
                                   {"model": self.model, "optimizer": self.opt, "criterion": self.loss})
        self.step, self.best, self.history, self.losses = 0, -1.0, [], []

    def resume(self) -> bool:
        """Restore last.pt if there is one; True when that run had finished."""
        state = self.last.load(self.device)
        if state is None:
            return False
        self.step, self.best, self.history = int(state["step"]), float(state["best"]), list(state["history"])
        self.losses = [float(x) for x in state["losses"]]
        return bool(state["done"])

    def start(self) -> None:
        self.out.mkdir(parents=True, exist_ok=True)
        write_text(self.out / "config.yaml", OmegaConf.to_yaml(self.cfg, resolve=True))
        print(f"joint {self.cfg.name}: {self.card.loss} on {self.card.features} ({self.card.feat_dim}-wide "
              f"{self.cfg.data.source}), {self.card.vocab_size} words; float32 on {self.device}", flush=True)

    def train_step(self, images: torch.Tensor, captions: torch.Tensor) -> float:
        self.model.train()
        self.loss.train()
        s = self.train_set
        img, txt = self.model(s.feats[images].to(self.device), s.captions[captions].to(self.device))
        loss = self.loss(img, txt)
        self.opt.zero_grad(set_to_none=True)
        loss.backward()
        if self.cfg.train.grad_clip > 0:
            torch.nn.utils.clip_grad_norm_(self.model.parameters(), self.cfg.train.grad_clip)
        self.opt.step()
        return float(loss.detach())

    def checkpoint(self, done: bool) -> None:
        fields = {"step": self.step, "best": self.best, "history": self.history, "losses": self.losses}
        self.last.save({**fields, "done": done, **self.card.to_dict()}, self.device)

    def validate(self, epoch: int, writer) -> None:
        """The val split's R@K and rsum; best.pt when the rsum is the best so far."""
        metrics = recall.rank_metrics(*embed(self.model, self.val_set, self.device), self.val_set.owner)
        mean_loss = float(np.mean(self.losses)) if self.losses else None
        self.history.append({"epoch": epoch, "step": self.step, "train_loss": mean_loss, **metrics.as_dict()})
        self.losses = []
        writer.add_scalar("val/rsum", metrics.rsum, self.step)
        shown = "-" if mean_loss is None else f"{mean_loss:.3f}"
        tqdm.write(f"{self.cfg.name} epoch {epoch}: val rsum {metrics.rsum:.1f} (i2t R@1 {metrics.i2t[0]:.1f}, "
                   f"t2i R@1 {metrics.t2i[0]:.1f}), train loss {shown}")
        if metrics.rsum > self.best:
            self.best = metrics.rsum
            save_checkpoint({"model": self.model.state_dict(), "epoch": epoch, "step": self.step,
                             "val_rsum": metrics.rsum, **self.card.to_dict()}, self.out / "best.pt")
        write_text(self.out / "history.json", json.dumps(self.history, indent=1))

    def finish(self) -> dict:
        """Score the test split with best.pt; write the metrics JSON and the Markdown table."""
        best = load_checkpoint(self.out / "best.pt")
        self.model.load_state_dict(best["model"])
        test = load_split(*self.test_args)
        result = recall.folds(*embed(self.model, test, self.device), test.owner, size=self.cfg.eval.fold_size)
        out = metrics_record(self, test, result, best)
        json_path, md_path = results_paths(self.cfg)
        json_path.parent.mkdir(parents=True, exist_ok=True)
        write_text(json_path, json.dumps(out, indent=1))
        write_text(md_path, markdown_table(out))
        print("\n".join([f"joint {self.cfg.name}: test, {out['n_images']} images, {out['n_captions']} captions "
                         f"(best val epoch {out['best_epoch']})", *result.full.lines(), f"-> {md_path}"]), flush=True)
        return out


def train(cfg: JointConfig, progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished), then score the test split; returns the path of best.pt."""
    r, t = JointRun(cfg), cfg.train
    if r.resume():
        print(f"joint {cfg.name}: already trained ({r.step} steps, best val rsum {r.best:.1f})", flush=True)
        r.finish()
        return r.out / "best.pt"
    r.start()
    writer = summary_writer(str(r.out / "tb"), purge_step=r.step + 1)
    bar = tqdm(total=r.total, initial=r.step, desc=cfg.name, disable=not progress)
    while r.step < r.total:
        epoch = r.step // r.per_epoch
        for images, captions in epoch_order(r.train_set, t.batch_size, cfg.seed, epoch)[r.step % r.per_epoch:]:
            value = r.train_step(images, captions)
            r.step += 1
            r.losses.append(value)
            bar.update(1)
            if r.step % t.log_every == 0:
                writer.add_scalar("train/loss", value, r.step)
                bar.set_postfix(loss=f"{value:.3f}", best=f"{max(r.best, 0):.1f}")
            if r.step % r.per_epoch == 0:
                break  # epoch end: validate before the checkpoint, so a resume never skips it
            if r.step % t.ckpt_every == 0:
                r.checkpoint(done=False)
            if asked_to_stop(r.step, t.stop_after_steps):
                raise StopRequested(r.step)  # like a kill: what came after the last checkpoint is lost
        r.validate(epoch + 1, writer)
        r.checkpoint(done=r.step == r.total)
        if asked_to_stop(r.step, t.stop_after_steps, r.total):
            raise StopRequested(r.step)
    bar.close()
    writer.close()
    r.finish()
    return r.out / "best.pt"


def metrics_record(r: JointRun, test: JointSplit, result: recall.Folds, best: dict) -> dict:
    folds = result.mean
    return {"run": r.cfg.name, "split": r.cfg.eval.test_split, "features": r.card.features,
            "features_sha256": r.card.features_sha256, "vocab_size": r.card.vocab_size,
            "vocab_sha256": r.card.vocab_sha256, "loss": r.card.loss, "n_images": int(len(test.feats)),
            "n_captions": int(len(test.captions)), "best_epoch": int(best["epoch"]),
            "val_rsum": float(best["val_rsum"]), "chance_r1": 100.0 / len(test.feats),
            "full": result.full.as_dict(), "fold_size": result.size, "n_folds": len(result.each),
            "folds_left_out": result.left_out, "folds_mean": folds.as_dict() if folds else None}


def markdown_table(m: dict) -> str:
    """The run's test R@K as a Markdown table: the full set, and the 1K folds' mean when there are any."""
    cols = [f"{side}_{k}" for side in ("i2t", "t2i") for k in ("r1", "r5", "r10", "medr", "meanr")] + ["rsum"]
    label = {"r1": "R@1", "r5": "R@5", "r10": "R@10", "medr": "medr", "meanr": "meanr"}
    head = "| set | images | " + " | ".join(f"{c[:3]} {label[c[4:]]}" if c != "rsum" else c for c in cols) + " |"
    rows = [head, "|" + "---|" * (len(cols) + 2)]
    sets = [("full", m["n_images"], m["full"])]
    if m["folds_mean"]:
        sets.append((f"{m['n_folds']} x 1K folds (mean)", m["fold_size"], m["folds_mean"]))
    rows += [f"| {name} | {n} | " + " | ".join(f"{v[c]:.1f}" for c in cols) + " |" for name, n, v in sets]
    note = (f"\nJoint space {m['run']} ({m['loss']}) on {Path(m['features']).name}, {m['split']} split: "
            f"{m['n_images']} images, {m['n_captions']} captions; R@K in percent (chance R@1 "
            f"{m['chance_r1']:.2f}), medr/meanr 1-based; best val rsum {m['val_rsum']:.1f} at epoch "
            f"{m['best_epoch']}.\n")
    return "\n".join(rows) + "\n" + note
