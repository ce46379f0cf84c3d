"""The captioner training skeleton that cross-entropy (captioners/xe.py) and self-critical
(rl/scst.py) training share; they differ only in the step they hand it.

One screen of loop (nanoGPT style): seeded epoch batches (sharded under torchrun) -> the recipe's
step (a loss and its per-step numbers) -> gradient clipping -> Adam; the lr steps down by
``lr_decay_rate`` every ``lr_decay_every`` epochs. After each ``val.every_epochs`` epochs rank 0
decodes the validation images and scores them with pycocoevalcap's CIDEr-D; the best epoch is kept as
``best.pt``; with ``train.patience`` training stops once that many validations bring no new best.
``last.pt`` (atomic; optimizer, step, RNG states, history) lets a killed run resume to the same
weights as an uninterrupted one. Files under ``out_dir``::

    best.pt       weights + model_args + vocabulary + data paths + stage: what captioners.predict needs, and
                  Adam's state at that validation (SCST may start from it: train.init_optimizer)
    last.pt       resumable training state
    history.json  per validation: epoch, step, val CIDEr-D, lr, the epoch's mean per-step numbers
    config.yaml   the merged config;  tb/  TensorBoard scalars
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np
import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from capcore import distributed
from capcore.atomic import write_text
from capcore.checkpoint import save_checkpoint
from capcore.config import config_arguments
from capcore.harness import LoopCheckpoint, StopRequested, asked_to_stop
from capcore.optim import adam
from capcore.run_layout import CaptionerDir, CaptionerManifest, write_manifest
from capcore.stopwatch import Stopwatch
from captioners.card import CaptionerCard
from captioners.data import (
    CaptionDataset,
    EpochBatches,
    RunBatches,
    ShardedBatches,
    loader,
    steps_per_epoch,
)
from captioners.validation import corpus_cider_d, generate


@dataclass
class StepContext:
    """What a recipe's step may need besides the batch."""
    net: torch.nn.Module  # the model, DDP-wrapped under torchrun
    epoch: int
    lr: float
    batches: EpochBatches | ShardedBatches
    index: int  # the batch's position in this epoch's (remaining) batches
    world: int


@dataclass
class StepResult:
    loss: torch.Tensor  # what backward() sees
    stats: dict[str, float]  # per-step numbers: their epoch means go into history.json
    scalars: dict[str, float] = field(default_factory=dict)  # logged to TensorBoard every log_every steps
    postfix: dict[str, float] = field(default_factory=dict)  # shown on the progress bar


@dataclass
class Recipe:
    """What distinguishes one training stage from another."""
    kind: str  # "captioner" (XE) | "scst": the stage name in messages and checkpoints
    step: Callable[[dict, StepContext], StepResult]
    stats: tuple[str, ...]  # the keys of StepResult.stats
    log_prefix: str  # TensorBoard group of the per-step scalars
    validate_first: bool = False  # score the starting weights (SCST: best.pt is never worse than its XE start)
    describe_val: Callable[[dict[int, str]], tuple[dict, str]] | None = None  # extra history fields + note
    summary: Callable[[dict], str] | None = None  # the end-of-run line per validation, after the epoch
    rngs: dict[str, torch.Generator] = field(default_factory=dict)  # saved and restored with last.pt (SCST's sampler)
    begin_epoch: Callable[[int], None] | None = None
    other_start: str = ""  # what else a checkpoint with another fingerprint may come from, for the error
    eligible: Callable[[dict, dict], bool] | None = None  # (validation, first validation) -> may it be best.pt?
    ddp: bool = True  # DDP around the model (the step calls its forward); False: the step drives the model's
    # own methods (sampling), and the gradients are averaged over processes after backward
    optimizer_start: dict | None = None  # Adam's state to start from (SCST: the XE best.pt's), not a fresh one


def lr_at(t, epoch: int) -> float:
    if t.lr_decay_start < 0 or epoch < t.lr_decay_start:
        return t.lr
    return t.lr * t.lr_decay_rate ** ((epoch - t.lr_decay_start) // t.lr_decay_every)


def warmed_lr(lr: float, step: int, warmup: int) -> float:
    """The lr of optimiser step ``step`` (0-based) under a linear warm-up of ``warmup`` steps (0: none)."""
    return lr * min(1.0, (step + 1) / warmup) if warmup > 0 else lr


def plateaued(history: list[dict], patience: int | None) -> bool:
    """True once the last ``patience`` validations brought no new best val CIDEr-D (None: never)."""
    if patience is None or not history:
        return False
    scores = [h["cider_d"] for h in history]
    return len(scores) - 1 - int(np.argmax(scores)) >= patience


def clip_gradients(model: torch.nn.Module, mode: str, limit: float) -> None:
    if mode == "value":
        torch.nn.utils.clip_grad_value_(model.parameters(), limit)
    elif mode == "norm":
        torch.nn.utils.clip_grad_norm_(model.parameters(), limit)


@dataclass
class Progress:
    """What a run has done: optimiser steps, the best val CIDEr-D, every validation, and the per-step
    numbers since the last one (their means go into the next validation's history entry)."""
    step: int = 0
    best: float = -math.inf
    history: list[dict] = field(default_factory=list)
    stats: dict[str, list[float]] = field(default_factory=dict)

    def fields(self) -> dict:
        return {"step": self.step, "best_cider": self.best, "history": self.history, "epoch_stats": self.stats}

    @classmethod
    def restored(cls, state: dict, keys: tuple[str, ...]) -> "Progress":
        stats = {k: [] for k in keys}
        stats.update({k: [float(x) for x in v] for k, v in state["epoch_stats"].items()})
        return cls(int(state["step"]), float(state["best_cider"]), list(state["history"]), stats)


class CaptionerLoop:
    """One run of ``recipe`` (XE or SCST): resume, validation, checkpoints, and the loop over epochs."""

    def __init__(self, cfg, recipe: Recipe, model: torch.nn.Module, train_set: CaptionDataset,
                 val_set: CaptionDataset, refs: dict[int, list[str]], vocab: list[str], max_length: int,
                 card: CaptionerCard, device: torch.device, progress: bool):
        self.cfg, self.recipe, self.model, self.train_set, self.val_set = cfg, recipe, model, train_set, val_set
        self.refs, self.vocab, self.max_length, self.card, self.device = refs, vocab, max_length, card, device
        t = cfg.train
        self.where, self.rank0, self.world = (CaptionerDir(Path(cfg.out_dir)), distributed.is_main(),
                                              distributed.world_size())
        self.opt = adam(model.parameters_in_file_order(), fused=False, lr=t.lr, betas=tuple(t.betas), eps=t.eps,
                        weight_decay=t.weight_decay)  # torch's default kernel: the captioners' numbers stay
        if recipe.optimizer_start is not None:  # its moments; the lr, warm-up and decay stay this run's
            self.opt.load_state_dict(recipe.optimizer_start)
        self.per_epoch = steps_per_epoch(len(train_set), t.batch_size)
        self.total = t.epochs * self.per_epoch
        self.last = LoopCheckpoint(self.where.last, card.fingerprint, {"model": model, "optimizer": self.opt},
                                   dict(recipe.rngs), other=f"another config{recipe.other_start}")
        self.p = Progress(stats={k: [] for k in recipe.stats})
        self.show = progress
        self.watch = Stopwatch(f"{recipe.kind} {Path(cfg.out_dir).name}")  # steps and validation, printed by report()
        self.train_loader, self.run_batches = None, None  # built at the first epoch (train_epoch)

    def resume(self) -> bool:
        """Restore last.pt if there is one; True when that run had finished."""
        state = self.last.load(self.device)
        if state is None:
            return False
        self.p = Progress.restored(state, self.recipe.stats)
        return bool(state["done"])

    def start(self) -> None:
        """Rank 0 writes the merged config and the manifest, and says what precision runs."""
        if not self.rank0:
            return
        out, card = self.where.root, self.card
        out.mkdir(parents=True, exist_ok=True)
        write_text(self.where.config, OmegaConf.to_yaml(self.cfg, resolve=True))
        processes = f"; {self.world} processes (torchrun), each a share of every batch" if self.world > 1 else ""
        print(f"{self.recipe.kind} {self.cfg.name}: {card.precision}{processes}", flush=True)
        manifest = CaptionerManifest(stage=card.stage, core=card.core, features=card.features,
                                     refs=str(self.cfg.data.json), precision=card.precision,
                                     scst_signature=card.scst_signature or "")
        write_manifest(self.where.manifest, manifest, self.cfg.run_dir)

    def checkpoint(self, done: bool) -> None:
        if self.rank0:
            self.last.save({**self.p.fields(), "done": done, **self.card.to_dict()}, self.device)

    def validate(self, epoch: int, lr: float) -> None:
        """Decode val, score CIDEr-D (pycocoevalcap), log it, and keep best.pt when it is the best eligible."""
        with self.watch.phase("validation"):
            self._validate(epoch, lr)

    def _validate(self, epoch: int, lr: float) -> None:
        cfg, p, recipe = self.cfg, self.p, self.recipe
        preds, _ = generate(self.model, self.val_set, self.vocab, self.device, cfg.val.batch_size, self.max_length,
                            "beam" if cfg.val.beam_size > 1 else "greedy", cfg.val.beam_size,
                            num_workers=cfg.data.num_workers)
        score, _ = corpus_cider_d(preds, self.refs)
        extra, note = recipe.describe_val(preds) if recipe.describe_val else ({}, "")
        means = {k: float(np.mean(v)) if v else None for k, v in p.stats.items()}
        p.history.append({"epoch": epoch, "step": p.step, "cider_d": score, "lr": lr, **means, **extra})
        self.writer.add_scalar("val/cider_d", score, p.step)
        for k, v in extra.items():
            self.writer.add_scalar(f"val/{k}", v, p.step)
        first = next(iter(preds.items()))
        tqdm.write(f"{cfg.name} epoch {epoch}: val CIDEr-D {score:.3f} ({len(preds)} images){note}, "
                   f"e.g. {first[0]}: {first[1]!r}")
        for v in p.stats.values():
            v.clear()
        may_be_best = recipe.eligible is None or len(p.history) == 1 or recipe.eligible(p.history[-1], p.history[0])
        if recipe.eligible is not None:
            p.history[-1]["eligible"] = may_be_best  # eval.reporting.scst_gains finds best.pt's validation by it
        if score > p.best and may_be_best:
            p.best = score
            save_checkpoint({"model": self.model.state_dict(), "optimizer": self.opt.state_dict(), "epoch": epoch,
                             "step": p.step, "val_cider": score, **self.card.to_dict()}, self.where.best)

    def train_epoch(self, epoch: int, lr: float, net: torch.nn.Module) -> None:
        """The epoch's remaining steps (a resumed run starts mid-epoch); returns at the epoch's end."""
        cfg, t, p, recipe = self.cfg, self.cfg.train, self.p, self.recipe
        batches = EpochBatches(len(self.train_set), t.batch_size, cfg.seed, epoch, p.step % self.per_epoch)
        if self.world > 1:
            batches = ShardedBatches(batches, distributed.rank(), self.world)
        if self.train_loader is None:  # once per run: its workers keep their HDF5 handles from epoch to epoch
            self.run_batches = RunBatches()
            self.train_loader = loader(self.train_set, self.run_batches, cfg.data.num_workers, self.device,
                                       persistent=True)
        self.run_batches.use(batches)
        for i, batch in enumerate(self.train_loader):
            if self.world > 1:  # dropout and sampling draw per-process, per-step seeded streams
                torch.manual_seed(distributed.rank_seed(cfg.seed, p.step))
            if p.step <= t.lr_warmup_steps:  # a function of the step alone: a resumed run warms up the same
                for group in self.opt.param_groups:
                    group["lr"] = warmed_lr(lr, p.step, t.lr_warmup_steps)
            result = recipe.step(batch, StepContext(net, epoch, lr, batches, i, self.world))
            self.opt.zero_grad(set_to_none=True)
            result.loss.backward()
            if not recipe.ddp:
                distributed.average_grads(self.model.parameters())
            clip_gradients(self.model, t.grad_clip_mode, t.grad_clip)
            self.opt.step()
            p.step += 1
            for key, value in result.stats.items():
                p.stats[key].append(value)
            self.bar.update(1)
            if p.step % t.log_every == 0:
                for key, value in result.scalars.items():
                    self.writer.add_scalar(f"{recipe.log_prefix}/{key}", value, p.step)
                self.bar.set_postfix({k: f"{v:.3f}" for k, v in result.postfix.items()}, best=f"{max(p.best, 0):.3f}")
            if p.step % self.per_epoch == 0:
                return  # epoch end: validate before the checkpoint, so a resume never skips it
            if p.step % t.ckpt_every == 0:
                self.checkpoint(done=False)
            if asked_to_stop(p.step, t.stop_after_steps):
                distributed.barrier()  # no process dies (and makes torchrun stop rank 0) mid-write
                raise StopRequested(p.step)  # like a kill: what came after the last checkpoint is lost

    def end_epoch(self, epoch: int, lr: float) -> bool:
        """Validate (every val.every_epochs), checkpoint, and say whether the plateau stop ends the run."""
        t, p = self.cfg.train, self.p
        if self.rank0 and (epoch % self.cfg.val.every_epochs == 0 or p.step == self.total):
            self.validate(epoch, lr)
        stopped = self.rank0 and plateaued(p.history, t.patience)
        if self.world > 1:  # every process stops together: rank 0's decision, summed over processes
            stopped = bool(distributed.all_sum(torch.tensor(float(stopped), device=self.device)).item() > 0)
        self.checkpoint(done=p.step == self.total or stopped)
        if self.rank0:
            write_text(self.where.history, json.dumps(p.history, indent=1))
        distributed.barrier()  # the others wait for rank 0's validation and checkpoint
        if stopped and self.rank0:
            tqdm.write(f"{self.cfg.name}: val CIDEr-D has not risen for {t.patience} validations; stopping at "
                       f"epoch {epoch} of {t.epochs}")
        return stopped

    def run(self) -> Path:
        """The loop: (score the start) -> epochs of steps, each ended by validation and a checkpoint."""
        t, p, recipe = self.cfg.train, self.p, self.recipe
        # scalars up to ``step`` were logged before its checkpoint: a resume hides only later ones
        self.writer = distributed.summary_writer(str(self.where.root / "tb"), purge_step=p.step + 1)
        if recipe.validate_first and p.step == 0 and not p.history:
            if self.rank0:
                self.validate(0, t.lr)
                write_text(self.where.history, json.dumps(p.history, indent=1))
            self.checkpoint(done=False)
            distributed.barrier()
        self.bar = tqdm(total=self.total, initial=p.step, desc=self.cfg.name, disable=not (self.show and self.rank0))
        net = distributed.wrap(self.model, self.device) if recipe.ddp else self.model
        while p.step < self.total:
            epoch = p.step // self.per_epoch
            lr = lr_at(t, epoch)
            for group in self.opt.param_groups:
                group["lr"] = lr
            if recipe.begin_epoch:
                recipe.begin_epoch(epoch)
            with self.watch.phase("steps"):
                self.train_epoch(epoch, lr, net)
            if self.end_epoch(epoch + 1, lr):
                break
            if asked_to_stop(p.step, t.stop_after_steps, self.total):
                raise StopRequested(p.step)
        self.bar.close()
        self.writer.close()
        return self.where.best

    def report(self) -> None:
        if not self.rank0:
            return
        p = self.p
        print(f"{self.recipe.kind} {self.cfg.name}: {p.step} steps, best val CIDEr-D {p.best:.3f} -> {self.where.best}")
        print(self.watch.line(), flush=True)
        for h in p.history:
            print(f"  epoch {h['epoch']:3d}  val CIDEr-D {h['cider_d']:.3f}  "
                  + (self.recipe.summary(h) if self.recipe.summary else "") + f"  lr {h['lr']:.2e}")


def training_main(load: Callable, train: Callable, doc: str, argv: list[str] | None) -> None:
    """``python -m captioners.xe`` / ``rl.scst``: ``--config FILE [k=v ...]``, train, leave the process
    group. A simulated kill (train.stop_after_steps) unwinds to run_cli, which exits 3."""
    train(load(*config_arguments(doc, argv)))
    distributed.leave()


def fit(cfg, recipe: Recipe, model: torch.nn.Module, train_set: CaptionDataset, val_set: CaptionDataset,
        refs: dict[int, list[str]], vocab: list[str], max_length: int, card: CaptionerCard, device: torch.device,
        progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished) with ``recipe``'s step; returns the path of best.pt.
    ``card`` goes into every checkpoint (model_args, vocabulary, paths, fingerprint...: captioners.card)."""
    loop = CaptionerLoop(cfg, recipe, model, train_set, val_set, refs, vocab, max_length, card, device, progress)
    finished = loop.resume()
    # every process has read last.pt before rank 0 may write it (SCST's first validation does): a process
    # that started late would otherwise resume from rank 0's new checkpoint and skip a collective the others
    # wait in (a hang seen under load with --nproc 2)
    distributed.barrier()
    if finished:
        if loop.rank0:
            print(f"{recipe.kind} {cfg.name}: already trained ({loop.p.step} steps, best CIDEr-D {loop.p.best:.3f})"
                  f" -> {loop.where.best}")
        return loop.where.best
    loop.start()
    best = loop.run()
    loop.report()
    return best
