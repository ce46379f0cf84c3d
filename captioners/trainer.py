"""The captioner training skeleton that cross-entropy (captioners/train.py) and self-critical
(rl/train.py) training share; they differ only in the step they hand it.

One screen of loop (nanoGPT style): seeded epoch batches (sharded under torchrun) -> the recipe's
step (a loss and its per-step numbers) -> gradient clipping -> Adam; the lr steps down by
``lr_decay_rate`` every ``lr_decay_every`` epochs. After each ``val.every_epochs`` epochs rank 0
decodes the validation images and scores them with pycocoevalcap's CIDEr-D; the best epoch is kept as
``best.pt``; with ``train.patience`` training stops once that many validations bring no new best.
``last.pt`` (atomic; optimizer, step, RNG states, history) lets a killed run resume to the same
weights as an uninterrupted one. Files under ``out_dir``::

    best.pt       weights + model_args + vocabulary + data paths + stage: what captioners.decode needs, and
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
from capcore.checkpoint import load_checkpoint, save_checkpoint
from capcore.config import config_hash
from capcore.errors import CapawareError
from capcore.harness import StopRequested, asked_to_stop
from capcore.run_layout import CaptionerDir, CaptionerManifest, write_manifest
from captioners.card import CaptionerCard
from captioners.data import (
    CaptionDataset,
    EpochBatches,
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
    extra_state: tuple[Callable[[], dict], Callable[[dict], None]] | None = None  # e.g. the sampling RNG
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


def fit(cfg, recipe: Recipe, model: torch.nn.Module, train_set: CaptionDataset, val_set: CaptionDataset,
        refs: dict[int, list[str]], vocab: list[str], max_length: int, card: CaptionerCard, device: torch.device,
        progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished) with ``recipe``'s step; returns the path of best.pt.
    ``card`` goes into every checkpoint (model_args, vocabulary, paths, fingerprint...: captioners.card)."""
    out, t = Path(cfg.out_dir), cfg.train
    where = CaptionerDir(out)
    world, rank0 = distributed.world_size(), distributed.is_main()
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)
    per_epoch = steps_per_epoch(len(train_set), t.batch_size)
    total = t.epochs * per_epoch
    last, best_path = where.last, where.best
    step, best, history = 0, -math.inf, []
    stats: dict[str, list[float]] = {k: [] for k in recipe.stats}  # per step, since the last validation
    if recipe.optimizer_start is not None:  # its moments; the lr, warm-up and decay stay this run's
        opt.load_state_dict(recipe.optimizer_start)
    if last.is_file():
        state = load_checkpoint(last)
        if state["fingerprint"] != card.fingerprint:
            raise CapawareError(last, f"checkpoint belongs to another config{recipe.other_start}",
                                "delete the run folder or choose another out_dir")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"])
        if recipe.extra_state:
            recipe.extra_state[1](state["extra"])
        step, best, history = int(state["step"]), float(state["best_cider"]), list(state["history"])
        stats.update({k: [float(x) for x in v] for k, v in state["epoch_stats"].items()})
        if state["done"]:
            if rank0:
                print(f"{recipe.kind} {cfg.name}: already trained ({step} steps, best CIDEr-D {best:.3f})"
                      f" -> {best_path}")
            return best_path
    if rank0:
        out.mkdir(parents=True, exist_ok=True)
        write_text(where.config, OmegaConf.to_yaml(cfg, resolve=True))
        print(f"{recipe.kind} {cfg.name}: {card.precision}", flush=True)
        manifest = CaptionerManifest(stage=card.stage, core=card.core, features=card.features, refs=str(cfg.data.json),
                                     precision=card.precision, scst_signature=card.scst_signature or "")
        write_manifest(where.manifest, manifest, cfg.run_dir)

    def checkpoint(done: bool) -> None:
        if not rank0:
            return
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                 "step": step, "best_cider": best, "history": history, "epoch_stats": stats, "done": done,
                 **card.to_dict()}
        if recipe.extra_state:
            state["extra"] = recipe.extra_state[0]()
        if device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state()
        save_checkpoint(state, last)

    # scalars up to ``step`` were logged before its checkpoint: a resume hides only later ones
    writer = distributed.summary_writer(str(out / "tb"), purge_step=step + 1)

    def validate(epoch: int, lr: float) -> None:
        nonlocal best
        preds, _ = generate(model, val_set, vocab, device, cfg.val.batch_size, max_length,
                            "beam" if cfg.val.beam_size > 1 else "greedy", cfg.val.beam_size)
        score, _ = corpus_cider_d(preds, refs)
        extra, note = recipe.describe_val(preds) if recipe.describe_val else ({}, "")
        means = {k: float(np.mean(v)) if v else None for k, v in stats.items()}
        history.append({"epoch": epoch, "step": step, "cider_d": score, "lr": lr, **means, **extra})
        writer.add_scalar("val/cider_d", score, step)
        for k, v in extra.items():
            writer.add_scalar(f"val/{k}", v, step)
        first = next(iter(preds.items()))
        tqdm.write(f"{cfg.name} epoch {epoch}: val CIDEr-D {score:.3f} ({len(preds)} images){note}, "
                   f"e.g. {first[0]}: {first[1]!r}")
        for v in stats.values():
            v.clear()
        may_be_best = recipe.eligible is None or len(history) == 1 or recipe.eligible(history[-1], history[0])
        if recipe.eligible is not None:
            history[-1]["eligible"] = may_be_best  # eval.scst_gains finds best.pt's validation by it
        if score > best and may_be_best:
            best = score
            save_checkpoint({"model": model.state_dict(), "optimizer": opt.state_dict(), "epoch": epoch, "step": step,
                             "val_cider": score, **card.to_dict()}, best_path)

    if recipe.validate_first and step == 0 and not history:
        if rank0:
            validate(0, t.lr)
            write_text(where.history, json.dumps(history, indent=1))
        checkpoint(done=False)
        distributed.barrier()
    bar = tqdm(total=total, initial=step, desc=cfg.name, disable=not (progress and rank0))
    net = distributed.wrap(model, device) if recipe.ddp else model
    while step < total:
        epoch, start = divmod(step, per_epoch)
        lr = lr_at(t, epoch)
        for group in opt.param_groups:
            group["lr"] = lr
        if recipe.begin_epoch:
            recipe.begin_epoch(epoch)
        batches = EpochBatches(len(train_set), t.batch_size, cfg.seed, epoch, start)
        if world > 1:
            batches = ShardedBatches(batches, distributed.rank(), world)
        for i, batch in enumerate(loader(train_set, batches, cfg.data.num_workers)):
            if world > 1:  # dropout and sampling draw per-process, per-step seeded streams
                torch.manual_seed(distributed.rank_seed(cfg.seed, step))
            if step <= t.lr_warmup_steps:  # a function of the step alone: a resumed run warms up the same
                for group in opt.param_groups:
                    group["lr"] = warmed_lr(lr, step, t.lr_warmup_steps)
            result = recipe.step(batch, StepContext(net, epoch, lr, batches, i, world))
            opt.zero_grad(set_to_none=True)
            result.loss.backward()
            if not recipe.ddp:
                distributed.average_grads(model.parameters())
            clip_gradients(model, t.grad_clip_mode, t.grad_clip)
            opt.step()
            step += 1
            for key, value in result.stats.items():
                stats[key].append(value)
            bar.update(1)
            if step % t.log_every == 0:
                for key, value in result.scalars.items():
                    writer.add_scalar(f"{recipe.log_prefix}/{key}", value, step)
                bar.set_postfix({k: f"{v:.3f}" for k, v in result.postfix.items()}, best=f"{max(best, 0):.3f}")
            if step % per_epoch == 0:
                break  # epoch end: validate before the checkpoint, so a resume never skips it
            if step % t.ckpt_every == 0:
                checkpoint(done=False)
            if asked_to_stop(step, t.stop_after_steps):
                distributed.barrier()  # no process dies (and makes torchrun stop rank 0) mid-write
                raise StopRequested(step)  # like a kill: what came after the last checkpoint is lost
        epoch += 1
        if rank0 and (epoch % cfg.val.every_epochs == 0 or step == total):
            validate(epoch, lr)
        stopped = rank0 and plateaued(history, t.patience)
        if world > 1:  # every process stops together: rank 0's decision, summed over processes
            stopped = bool(distributed.all_sum(torch.tensor(float(stopped), device=device)).item() > 0)
        checkpoint(done=step == total or stopped)
        if rank0:
            write_text(where.history, json.dumps(history, indent=1))
        distributed.barrier()  # the others wait for rank 0's validation and checkpoint
        if stopped:
            if rank0:
                tqdm.write(f"{cfg.name}: val CIDEr-D has not risen for {t.patience} validations; stopping at "
                           f"epoch {epoch} of {t.epochs}")
            break
        if asked_to_stop(step, t.stop_after_steps, total):
            raise StopRequested(step)
    bar.close()
    writer.close()
    if rank0:
        print(f"{recipe.kind} {cfg.name}: {step} steps, best val CIDEr-D {best:.3f} -> {best_path}")
        for h in history:
            print(f"  epoch {h['epoch']:3d}  val CIDEr-D {h['cider_d']:.3f}  "
                  + (recipe.summary(h) if recipe.summary else "") + f"  lr {h['lr']:.2e}")
    return best_path


