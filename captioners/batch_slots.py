"""Reused shared-memory buffers that the captioners' loader workers read batches into (issue #47).

Why: a worker that reads a batch into *fresh* shared memory pays for new tmpfs pages on every batch (the kernel
zeroes them, then faults them in twice: in the worker, and again in the training loop's process). At paper sizes
(14 x 14 x 2048 float16, batch 16, 2 cores) that made a worker's batch three times as slow as the same read in the
loop's own process (benchmarks/bench_caption_loader.py). A worker that keeps a small ring of buffers and reuses
them pays for its pages once.

Why a ring of ``PREFETCH + 1`` is enough: a DataLoader keeps at most ``prefetch_factor`` batches of one worker
outstanding (asked for and not yet handed to the loop), so a slot is asked to hold a new batch only after the loop
took the batch it held. ``take`` copies the batch out of the slot as it is handed over (``pin_memory`` does that copy
on a GPU run), so the loop owns what it gets and nothing it keeps changes under it.

Why stamps: that bound is the DataLoader's behaviour, not its contract. Each slot has a stamp in shared memory:
the worker writes -1 before it fills the slot and the batch's number after; ``take`` reads the stamp after its copy.
A batch whose slot was written again is read once more in the loop's own process and a warning says so: a changed
DataLoader costs speed, never a wrong batch.
"""
from __future__ import annotations

import warnings

import torch

PREFETCH = 4  # batches a loader worker reads ahead (the DataLoader's prefetch_factor)


class SlotStamp:
    """Which slot a batch sits in and the number it was written as. Not a tensor, so ``pin_memory`` passes it
    through as it is, and the live stamps it reads stay the worker's shared ones."""

    def __init__(self, stamps: torch.Tensor, slot: int, number: int, names: tuple[str, ...]):
        self.stamps, self.slot, self.number, self.names = stamps, slot, number, names

    def intact(self) -> bool:
        return int(self.stamps[self.slot]) == self.number


class BatchSlots:
    """One loader worker's ring of ``count`` batch buffers per tensor, in shared memory, reused batch after batch."""

    def __init__(self, count: int = PREFETCH + 1):
        self.count, self.written = count, 0
        self.buffers: dict[str, torch.Tensor] = {}
        self.stamps = torch.full((count,), -1, dtype=torch.int64).share_memory_()

    def claim(self, rows: dict[str, tuple[tuple[int, ...], torch.dtype]], n: int
              ) -> tuple[dict[str, torch.Tensor], SlotStamp]:
        """Views of the next slot, ``n`` rows of each named (row shape, dtype), and the stamp to ``seal``. A batch
        larger than the ring's rows makes a new ring (the old one lives while the loop still holds its batches)."""
        if any(name not in self.buffers or self.buffers[name].shape[1] < n
               or self.buffers[name].shape[2:] != shape or self.buffers[name].dtype != dtype
               for name, (shape, dtype) in rows.items()):
            self.buffers = {name: torch.empty((self.count, n, *shape), dtype=dtype).share_memory_()
                            for name, (shape, dtype) in rows.items()}
            self.stamps = torch.full((self.count,), -1, dtype=torch.int64).share_memory_()
        slot = self.written % self.count
        self.stamps[slot] = -1
        stamp = SlotStamp(self.stamps, slot, self.written, tuple(rows))
        self.written += 1
        return {name: buffer[slot, :n] for name, buffer in self.buffers.items()}, stamp

    @staticmethod
    def seal(stamp: SlotStamp) -> None:
        stamp.stamps[stamp.slot] = stamp.number


def take(batch: dict, copied: bool, read_again) -> dict:
    """A batch the loop owns: its slot's tensors copied out (unless ``copied``: ``pin_memory`` did it), checked
    against the slot's stamp; a batch whose slot was written again is read again by ``read_again(index)``, which
    gives its tensors by name."""
    stamp = batch.pop("slot", None)
    if stamp is None:
        return batch
    if not copied:
        batch.update({name: batch[name].clone() for name in stamp.names})
    if not stamp.intact():
        warnings.warn("a loader worker wrote a batch's buffer again before the loop took it; the batch was read "
                      "again in the loop's process (correct, slower). The DataLoader may read further ahead than "
                      "captioners.batch_slots.PREFETCH says", RuntimeWarning, stacklevel=2)
        batch.update(read_again(batch["index"]))
    return batch

