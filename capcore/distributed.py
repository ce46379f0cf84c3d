"""Multi-process training under ``torchrun``: one process per device, DistributedDataParallel.

torchrun sets WORLD_SIZE, RANK, LOCAL_RANK and the rendezvous address; without it (or with
WORLD_SIZE=1) every function here is a no-op and a stage runs exactly as in one process. The
training loops keep one *global* batch sequence (the same seeded sampler in every process), give
each process a share of every global batch, and normalise the loss so that DDP's gradient average
equals the one-process gradient of the global batch. Only rank 0 writes files (checkpoints,
TensorBoard, history, progress bars); the others wait for it at a barrier.
"""
from __future__ import annotations

import atexit
import contextlib
import os
from datetime import timedelta

import numpy as np
import torch
import torch.distributed as dist

from capcore import process_exit

# Rank 0 alone may build a caption graph, pretrain, or validate for a long time while the others
# wait at a barrier. torchrun stops every process when one dies, so a long wait cannot hang forever.
TIMEOUT = timedelta(hours=12)


def launched() -> bool:
    """True inside a torchrun job of more than one process."""
    return int(os.environ.get("WORLD_SIZE", "1")) > 1


def launched_rank() -> int:
    """This process's global rank as torchrun set it (0 outside torchrun), also after ``shutdown``: what a
    script checks before the work that rank 0 alone does once training is over."""
    return int(os.environ.get("RANK", "0"))


def active() -> bool:
    return dist.is_available() and dist.is_initialized() and dist.get_world_size() > 1


def world_size() -> int:
    return dist.get_world_size() if active() else 1


def rank() -> int:
    return dist.get_rank() if active() else 0


def is_main() -> bool:
    return rank() == 0


def init(device: torch.device) -> int:
    """Join the torchrun process group once (gloo on CPU; nccl for CUDA tensors, gloo for CPU ones).

    Returns the world size (1 outside torchrun). Called by each training loop, so a caller that
    knows nothing of torchrun (the study) still trains in parallel.
    """
    if not launched():
        return 1
    if not dist.is_initialized():
        if device.type == "cuda":
            dist.init_process_group("cpu:gloo,cuda:nccl", timeout=TIMEOUT, device_id=device)
        else:
            dist.init_process_group("gloo", timeout=TIMEOUT)
        atexit.register(shutdown)
        process_exit.skip_teardown()  # why: capcore/process_exit.py (issue #45)
    return dist.get_world_size()


def shutdown() -> None:
    if dist.is_available() and dist.is_initialized():
        dist.destroy_process_group()


def leave() -> None:
    """Leave the torchrun job, every rank the same way: wait at a barrier until every other rank is done
    with the group (no rank leaves while another still sends to it), then destroy it. Rank 0 may go on
    alone afterwards (decoding, scoring, reports); the process then ends through ``capcore.errors.run_cli``,
    which skips the interpreter's teardown (capcore/process_exit.py says why)."""
    if active():
        dist.barrier()
    shutdown()


def barrier() -> None:
    if active():
        dist.barrier()


@contextlib.contextmanager
def rank_zero_first():
    """Rank 0 runs the body alone first (it may write shared files: synthetic data, graphs, prepro);
    the others run it afterwards and find those files written."""
    if active() and not is_main():
        dist.barrier()
    yield
    if active() and is_main():
        dist.barrier()


def share(n: int, rank_: int, world: int) -> np.ndarray:
    """Positions ``rank_, rank_ + world, ...`` of a global batch of ``n``: this process's share.

    Strided rather than contiguous, so that each share mixes anchors, neighbours and random items
    (per-process BatchNorm statistics then see a sample of the whole batch). Shares differ by at
    most one item and may be empty when ``n < world``.
    """
    return np.arange(rank_, n, world)


def gather_rows(local: torch.Tensor, n: int, grad: bool = False) -> torch.Tensor:
    """All ranks' shares (see ``share``) of an [n, ...] tensor, reassembled in global order.

    Shares of unequal length are padded for the collective and trimmed after it. With ``grad`` the
    gather is differentiable (``_AllGather``).
    """
    world = world_size()
    if world == 1:
        return local
    width = -(-n // world)
    pad = local.new_zeros((width - local.shape[0], *local.shape[1:]))
    padded = torch.cat([local, pad]).contiguous()
    parts = _AllGather.apply(padded) if grad else _all_gather(padded)
    order = np.concatenate([share(n, r, world) for r in range(world)])
    stacked = torch.cat([p[:len(share(n, r, world))] for r, p in enumerate(parts)])
    inverse = torch.from_numpy(np.argsort(order)).to(stacked.device)
    return stacked[inverse]


def _all_gather(x: torch.Tensor) -> torch.Tensor:
    parts = [torch.empty_like(x) for _ in range(dist.get_world_size())]
    dist.all_gather(parts, x)
    return torch.stack(parts)


class _AllGather(torch.autograd.Function):
    """[W, ...] every rank's ``x``; backward: the sum over ranks of the gradient of this rank's part.

    Every rank evaluates the same loss of the gathered batch, so the summed gradient is world-size
    times the gradient of the loss; DDP's average divides that back out.
    """

    @staticmethod
    def forward(ctx, x):
        return _all_gather(x)

    @staticmethod
    def backward(ctx, grad):
        grad = grad.contiguous()
        dist.all_reduce(grad)
        return grad[dist.get_rank()]


def all_sum(value: torch.Tensor) -> torch.Tensor:
    """Sum of ``value`` over ranks (a new tensor; no gradient)."""
    out = value.detach().clone()
    if active():
        dist.all_reduce(out)
    return out


def average_grads(params) -> None:
    """Average the gradients of parameters that live outside the DDP module (e.g. a loss's beta)."""
    if not active():
        return
    for p in params:
        if p.grad is not None:
            dist.all_reduce(p.grad)
            p.grad.div_(dist.get_world_size())


def wrap(module: torch.nn.Module, device: torch.device) -> torch.nn.Module:
    """DDP around ``module`` in a multi-process job; ``module`` itself otherwise."""
    if not active():
        return module
    from torch.nn.parallel import DistributedDataParallel

    return DistributedDataParallel(module, device_ids=[device.index] if device.type == "cuda" else None)


def rank_seed(seed: int, step: int) -> int:
    """A seed for this rank's random draws (dropout, scheduled sampling) at ``step``.

    Ranks must not share one dropout stream (identical masks on different data), and the streams
    must be a function of the step so that a resumed job draws what an uninterrupted one would,
    without storing every rank's RNG state in rank 0's checkpoint.
    """
    return int(np.random.default_rng([seed, step, rank()]).integers(2**62))


class NullWriter:
    """Stands in for SummaryWriter on ranks other than 0."""

    def add_scalar(self, *args, **kwargs) -> None:
        pass

    def flush(self) -> None:
        pass

    def close(self) -> None:
        pass


def summary_writer(log_dir: str, purge_step: int):
    """TensorBoard writer on rank 0, a no-op elsewhere."""
    if not is_main():
        return NullWriter()
    from torch.utils.tensorboard import SummaryWriter

    return SummaryWriter(log_dir, purge_step=purge_step)
