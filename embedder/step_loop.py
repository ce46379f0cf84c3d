"""One stage-one training step's surroundings, shared by the anchor-batch loop (embedder.train) and Gordo & Larlus's
pool-mined loop (embedder.g17_steps): the step's forward module, training mode with frozen norms held, and what
follows every optimiser step (the hook, the finite check, TensorBoard, checkpoints, a requested stop). A module of
its own so that both loops import it and neither imports the other."""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch.nn.utils import get_total_norm

from capcore import distributed
from capcore.finite import check_finite
from capcore.harness import StopRequested, asked_to_stop
from capcore.device import autocast
from embedder.model import hold_frozen_norms


class TrunkHead(torch.nn.Module):
    """One training forward: trunk (or its trainable rest) autocast to ``dtype`` (None: float32), head in
    float32 (the log-ratio needs precise distances). One module, so that DDP sees the whole step's forward."""

    def __init__(self, trunk: torch.nn.Module, head: torch.nn.Module, dtype: torch.dtype | None):
        super().__init__()
        self.trunk, self.head, self.dtype = trunk, head, dtype

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        with autocast(x.device, self.dtype):
            features = self.trunk(x)
        return self.head(features.float())


def freeze_bn(model: torch.nn.Module) -> None:
    """BatchNorm in eval mode: running statistics normalise, affine weights still train."""
    for m in model.modules():
        if isinstance(m, torch.nn.modules.batchnorm._BatchNorm):
            m.eval()


def log_step(writer, run, loss: torch.Tensor, step: int) -> None:
    writer.add_scalar("train/loss", loss.item(), step)
    writer.add_scalar("train/lr", run.sched.get_last_lr()[0], step)
    grads = [p.grad for p in run.params if p.grad is not None]
    writer.add_scalar("train/grad_norm", float(get_total_norm(grads)), step)


@dataclass
class RowOutputs:
    """Where the loop of one row reports: TensorBoard, its resumable checkpoint, the bar, a divergence's fix."""
    writer: object
    save_last: object  # (step, done) -> None: last.pt (rank 0)
    out_dir: Path
    name: str
    fix: str  # what to do when the loss is no longer finite
    progress: bool


def train_mode(run) -> None:
    """The model in training mode, its frozen stages and norms held."""
    run.model.train()
    hold_frozen_norms(run.model)  # a stage frozen in place (a backbone other than a ResNet) keeps its statistics
    if run.batchnorm == "frozen":
        freeze_bn(run.model)


def training_net(run) -> torch.nn.Module:
    """The model in training mode and the step's forward (trunk rest + head)."""
    train_mode(run)
    return distributed.wrap(TrunkHead(run.rest, run.model.head, run.dtype), run.device)


def after_step(run, t, out: RowOutputs, loss: torch.Tensor, step: int, bar, on_step=None) -> None:
    """What follows every optimiser step: the hook, the finite check, logs, checkpoints, a requested stop."""
    bar.update(1)
    if on_step is not None:
        on_step(step, run.model)
    if step % t.log_every == 0 or step % t.ckpt_every == 0 or step == run.total:
        check_finite(loss, out.out_dir, step, out.fix)
    if step % t.log_every == 0 or step == run.total:
        log_step(out.writer, run, loss, step)
        bar.set_postfix(loss=f"{loss.item():.4f}")
    if step % t.ckpt_every == 0 or step == run.total:
        out.save_last(step, step == run.total)
    if asked_to_stop(step, t.stop_after_steps, run.total):
        out.writer.close()  # the steps since the last checkpoint are lost, as in a kill, and replayed
        distributed.barrier()  # no process dies (and makes torchrun stop rank 0) mid-write
        raise StopRequested(step)
