"""Features + captions for the captioners: ``feats.h5`` (stage two) joined to ``labels.h5`` (prepro).

The join is by image id (cocoid), never by row order, so a features file may hold more images (all
splits, or another order) than one split needs; an image of the split without features is an error
that says how many are missing. The HDF5 file is opened lazily once per process (DataLoader worker)
and kept open: reopening it per read is what makes self-critical.pytorch's loader slow.

Training order is a permutation seeded by (seed, epoch), and captions per image are chosen by a
generator seeded by (seed, epoch, image), so a resumed run sees exactly the batches an uninterrupted
run would, whatever the number of workers.
"""
from __future__ import annotations

import copy
import math
import os
from pathlib import Path

import h5py
import numpy as np
import torch
from torch.utils.data import DataLoader, Dataset

from capcore.errors import CapawareError
from captioners.batch_slots import PREFETCH, BatchSlots, take
from captioners.prepro import Labels
from feature_extract.h5io import read_feats_info


class CaptionDataset(Dataset):
    """Images of one split: features (+ their captions when ``labels`` is given).

    An item key is an index, or ``(epoch, index)`` from :class:`EpochBatches` (epoch picks which
    captions an image with more or fewer than ``seq_per_img`` gets). ``labels=None`` serves every
    image of the features file (decoding a user's own images); then ``split`` must be ``all``.
    """

    def __init__(self, feats_path: str | Path, labels: Labels | None, split: str = "train", seq_per_img: int = 5,
                 in_memory: bool = False, seed: int = 0, max_images: int | None = None):
        self.info = info = read_feats_info(feats_path)
        self.labels, self.seq_per_img, self.seed = labels, seq_per_img, seed
        if labels is None:
            if split != "all":
                raise CapawareError(feats_path, f"split {split!r} needs a labels.h5", "give labels, or split 'all'")
            self.label_ix = None
            self.rows = np.flatnonzero(info.valid)
            self.image_ids = info.image_ids[self.rows]
        else:
            sel = np.arange(len(labels.image_ids)) if split == "all" else np.flatnonzero(labels.splits == split)
            if len(sel) == 0:
                raise CapawareError(labels.path, f"no images in split {split!r}",
                                    "splits are train (with restval), val, test")
            sel = sel[:max_images] if max_images else sel
            row_of = {int(i): r for r, i in enumerate(info.image_ids) if info.valid[r]}
            ids = labels.image_ids[sel]
            missing = [int(i) for i in ids if int(i) not in row_of]
            if missing:
                raise CapawareError(info.path, f"{len(missing)} of {len(ids)} {split} images of {labels.path} have "
                                    f"no features (image ids {missing[:5]}{' ...' if len(missing) > 5 else ''})",
                                    "extract features from the same Karpathy json the labels came from, "
                                    "or point data.features at the right file")
            self.label_ix = sel
            self.rows = np.array([row_of[int(i)] for i in ids], dtype=np.int64)
            self.image_ids = ids.astype(np.int64)
        self._file, self._pid = None, None
        self._att = self._fc = None
        self.slotted, self._slots, self._slots_pid = False, None, None  # see _worker_slots
        if in_memory:
            self._att, self._fc = self._read_all()

    def __len__(self) -> int:
        return len(self.rows)

    def __getstate__(self):
        """Workers get no open handle: each opens its own (h5py handles do not survive fork/pickle)."""
        state = dict(self.__dict__)
        state["_file"], state["_pid"], state["_slots"], state["_slots_pid"] = None, None, None, None
        return state

    def _h5(self) -> h5py.File:
        if self._file is None or self._pid != os.getpid():
            self._file, self._pid = h5py.File(self.info.path, "r"), os.getpid()
        return self._file

    def _read_all(self) -> tuple[np.ndarray, np.ndarray]:
        uniq, inverse = np.unique(self.rows, return_inverse=True)
        lo, hi = int(uniq[0]), int(uniq[-1]) + 1
        with h5py.File(self.info.path, "r") as f:
            if hi - lo <= 2 * len(uniq):  # splits are usually contiguous blocks: one slice read
                att, fc = f["att"][lo:hi][uniq - lo], f["fc"][lo:hi][uniq - lo]
            else:
                att = np.stack([f["att"][r] for r in uniq])
                fc = np.stack([f["fc"][r] for r in uniq])
        return att[inverse], fc[inverse]

    def features(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        if self._att is not None:
            return self._att[i], self._fc[i]
        f, r = self._h5(), int(self.rows[i])
        return f["att"][r], f["fc"][r]

    def __getitems__(self, keys: list) -> dict:
        """A whole batch at once (the DataLoader calls this instead of ``__getitem__`` per key): each image's
        rows read from the file straight into one buffer per tensor, in the file's dtype. Inside a worker of
        ``loader`` the buffers are the worker's reused shared-memory slots (``batch_slots``), so neither the
        collate nor the hand-off copies the batch, and no batch pays for new pages; per-item reads stacked in
        the collate copied every byte twice more (issue #47)."""
        pairs = [k if isinstance(k, tuple) else (0, k) for k in keys]
        index = np.array([i for _, i in pairs], dtype=np.int64)
        slots = self._worker_slots()
        if slots is None:
            batch = self.read_rows(torch.from_numpy(index))
        else:
            f = self._h5()
            batch, stamp = slots.claim({name: (f[name].shape[1:], torch_dtype(f[name])) for name in ("att", "fc")},
                                       len(index))
            self._read_into(batch, index)
            slots.seal(stamp)
            batch["slot"] = stamp
        batch.update({"image_id": torch.from_numpy(self.image_ids[index]), "index": torch.from_numpy(index)})
        if self.labels is not None:
            batch["labels"] = torch.from_numpy(np.stack([self.captions(i, e) for e, i in pairs]).astype(np.int64))
        return batch

    def read_rows(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        """The features of images ``index`` in this process's own memory: {"att", "fc"} in the file's dtype."""
        index = index.numpy()
        if self._att is not None:
            return {"att": torch.from_numpy(self._att[index]), "fc": torch.from_numpy(self._fc[index])}
        f = self._h5()
        batch = {name: torch.empty((len(index), *f[name].shape[1:]), dtype=torch_dtype(f[name]))
                 for name in ("att", "fc")}
        self._read_into(batch, index)
        return batch

    def _read_into(self, batch: dict[str, torch.Tensor], index: np.ndarray) -> None:
        f = self._h5()
        att, fc = batch["att"].numpy(), batch["fc"].numpy()
        for j, r in enumerate(self.rows[index].tolist()):
            f["att"].read_direct(att, np.s_[r], np.s_[j])
            f["fc"].read_direct(fc, np.s_[r], np.s_[j])

    def _worker_slots(self) -> BatchSlots | None:
        """This worker's slots when ``loader`` asked for them (``slotted``); None in the loop's process."""
        if not self.slotted or self._att is not None or torch.utils.data.get_worker_info() is None:
            return None
        if self._slots is None or self._slots_pid != os.getpid():
            self._slots, self._slots_pid = BatchSlots(), os.getpid()
        return self._slots

    def captions(self, i: int, epoch: int = 0) -> np.ndarray:
        """[seq_per_img, T] word ids; an image with another count is sampled (seeded by seed, epoch, i)."""
        caps = self.labels.captions_of(int(self.label_ix[i]))
        k = self.seq_per_img
        if len(caps) == k:
            return caps
        rng = np.random.default_rng([self.seed, epoch, int(self.label_ix[i])])
        pick = rng.choice(len(caps), size=k, replace=len(caps) < k)
        return caps[np.sort(pick)] if len(caps) > k else caps[pick]

    def __getitem__(self, key):
        epoch, i = key if isinstance(key, tuple) else (0, key)
        att, fc = self.features(i)
        item = {"att": att, "fc": fc, "image_id": int(self.image_ids[i]), "index": i}
        if self.labels is not None:
            item["labels"] = self.captions(i, epoch)
        return item


def torch_dtype(dataset: h5py.Dataset) -> torch.dtype:
    return torch.from_numpy(np.empty(0, dataset.dtype)).dtype


def collate(items: list[dict] | dict) -> dict:
    """A batch in the features file's own dtype: float16 features cross the worker hand-off (and, on a GPU, the
    bus) at half the bytes, and become float32 on the device (``on_device``). Casting in the workers cost COCO's
    loader 3-6x its images/s (issue #47). A batch ``CaptionDataset.__getitems__`` read whole passes through."""
    if isinstance(items, dict):
        return items
    out = {"att": torch.from_numpy(np.stack([it["att"] for it in items])),
           "fc": torch.from_numpy(np.stack([it["fc"] for it in items])),
           "image_id": torch.tensor([it["image_id"] for it in items], dtype=torch.int64),
           "index": torch.tensor([it["index"] for it in items], dtype=torch.int64)}
    if "labels" in items[0]:
        out["labels"] = torch.from_numpy(np.stack([it["labels"] for it in items]).astype(np.int64))
    return out


class EpochBatches:
    """The batches of one epoch: a permutation seeded by (seed, epoch), from batch ``start`` on (resume)."""

    def __init__(self, n: int, batch_size: int, seed: int, epoch: int, start: int = 0):
        self.n, self.batch_size, self.epoch, self.start = n, batch_size, epoch, start
        self.order = np.random.default_rng([seed, epoch]).permutation(n)

    def __len__(self) -> int:
        return steps_per_epoch(self.n, self.batch_size) - self.start

    def __iter__(self):
        for b in range(self.start, steps_per_epoch(self.n, self.batch_size)):
            yield [(self.epoch, int(i)) for i in self.order[b * self.batch_size:(b + 1) * self.batch_size]]


class ShardedBatches:
    """Process ``rank``'s share of each batch of ``batches`` under torchrun: keys ``rank::world``.

    Every process walks the same global batches, so together they train on exactly the one-process
    batch. A share can be empty (a last batch smaller than the world): the process then gets the
    batch's first image as a stand-in, marked in ``real`` so its loss is weighted 0; it still runs
    forward and backward, because DDP needs every process in every gradient all-reduce.
    """

    def __init__(self, batches, rank: int, world: int):
        self.batches, self.rank, self.world = batches, rank, world
        self.real: list[bool] = []  # per yielded share, filled as they are drawn
        self.sizes: list[int] = []  # the global batch's size, per yielded share

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        for keys in self.batches:
            part = keys[self.rank::self.world]
            self.real.append(bool(part))
            self.sizes.append(len(keys))
            yield part or keys[:1]


class RunBatches:
    """The batch sampler of a loader built once for a whole run: each epoch hands it its batches (``use``).
    With ``persistent`` workers (``loader``) the worker processes, and the HDF5 handles they opened, then
    live for the run instead of starting again at every epoch."""

    def __init__(self):
        self.batches = []

    def use(self, batches):
        self.batches = batches
        return batches

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self):
        return iter(self.batches)


def steps_per_epoch(n: int, batch_size: int) -> int:
    return math.ceil(n / batch_size)


class CaptionLoader(DataLoader):
    """A DataLoader whose workers read into reused slots (``batch_slots``): each batch is taken out of its slot
    as it is handed to the loop, by ``pin_memory``'s copy on a GPU run, by a copy here otherwise
    (``copies_out``)."""

    def __init__(self, *args, **kwargs):
        super().__init__(*args, **kwargs)
        self.copies_out = not self.pin_memory

    def __iter__(self):
        for batch in super().__iter__():
            yield take(batch, copied=not self.copies_out, read_again=self.read_again)

    def read_again(self, index: torch.Tensor) -> dict[str, torch.Tensor]:
        return self.dataset.read_rows(index)  # only a slotted CaptionDataset's batches are ever read again


def loader(dataset: CaptionDataset, batches, num_workers: int = 0, device: torch.device | None = None,
           persistent: bool = False) -> DataLoader:
    """A DataLoader over given batches; its own generator keeps the global torch RNG untouched. For a CUDA
    ``device`` batches come in pinned memory (``on_device`` then copies without blocking); workers read
    ``PREFETCH`` batches ahead into reused slots, and with ``persistent`` (batches a ``RunBatches``) they
    outlive each epoch. ``dataset`` itself is left as it was (a copy of it uses the slots)."""
    pin = device is not None and device.type == "cuda"
    if num_workers:
        dataset = copy.copy(dataset)
        dataset.slotted = True
    return CaptionLoader(dataset, batch_sampler=batches, collate_fn=collate, num_workers=num_workers,
                         pin_memory=pin, prefetch_factor=PREFETCH if num_workers else None,
                         persistent_workers=persistent and num_workers > 0, generator=torch.Generator().manual_seed(0))


def on_device(batch: dict, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
    """(fc, att) of a batch on ``device`` in float32, cast there: the host never converts the features."""
    return (batch["fc"].to(device, non_blocking=True).float(), batch["att"].to(device, non_blocking=True).float())


def eval_batches(n: int, batch_size: int) -> list[list[int]]:
    return [list(range(s, min(s + batch_size, n))) for s in range(0, n, batch_size)]
