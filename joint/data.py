"""The joint stage's data: a features file (``feats.h5``, stage two) joined to XE's ``labels.h5`` by image id,
read with h5py directly (the joint space sits below the captioners and stage two in ``.importlinter``, so it
reads their files, not their packages; the layouts are docs/design.md's and captioners/prepro.py's).

A split is held in memory as tensors: its images' features (``fc`` [N, C], or the ``att`` grid [N, cells, C]) in
float32, every caption of those images (``labels`` rows, 0-padded word ids) and each caption's image (``owner``).
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np
import torch

from capcore.checkpoint import file_sha256
from capcore.errors import CapawareError

XE_FIX = "train the captioners' XE first (it writes labels.h5 and vocab.json into data.prepro_dir)"


@dataclass
class JointSplit:
    feats: torch.Tensor  # [N, C] (fc) or [N, cells, C] (att), float32
    captions: torch.Tensor  # [M, L] int64 word ids, 0 after each caption's end
    owner: torch.Tensor  # [M] int64: caption j describes image owner[j]
    image_ids: np.ndarray  # [N]

    @property
    def feat_dim(self) -> int:
        return int(self.feats.shape[-1])


@dataclass(frozen=True)
class Vocabulary:
    """What the joint model's text side depends on: the number of words (ids 1..size) and vocab.json's hash."""
    path: str
    size: int
    sha256: str


def prepro_files(prepro_dir: str | Path) -> tuple[Path, Path]:
    """(labels.h5, vocab.json) of a captioners' prepro folder, both present, else one line saying who writes them."""
    labels, vocab = Path(prepro_dir) / "labels.h5", Path(prepro_dir) / "vocab.json"
    for path in (labels, vocab):
        if not path.is_file():
            raise CapawareError(path, "not found", XE_FIX)
    return labels, vocab


def read_vocabulary(vocab_json: str | Path) -> Vocabulary:
    path = Path(vocab_json)
    words = json.loads(path.read_text())["ix_to_word"]
    return Vocabulary(str(path.resolve()), len(words), file_sha256(path))


def features_identity(path: str | Path) -> str:
    """The features file's sha256 (its content, whatever its attributes say)."""
    return file_sha256(path)


def _labels_of(labels_h5: Path, split: str) -> tuple[np.ndarray, list[np.ndarray]]:
    with h5py.File(labels_h5, "r") as f:
        splits = f["split"][:].astype(str)
        sel = np.flatnonzero(splits == split)
        if len(sel) == 0:
            raise CapawareError(labels_h5, f"no images in split {split!r}", "splits are train, val and test")
        start, end, labels = f["label_start_ix"][:], f["label_end_ix"][:], f["labels"][:]
        return f["image_id"][:][sel].astype(np.int64), [labels[start[i]:end[i]] for i in sel]


def _feature_rows(feats_h5: Path, image_ids: np.ndarray, split: str) -> tuple[np.ndarray, np.ndarray]:
    """The rows of ``image_ids`` in the features file (every one present and not skipped), and the file's ids."""
    with h5py.File(feats_h5, "r") as f:
        ids = f["image_id"][:].astype(np.int64)
        valid = ~f["skipped"][:].astype(bool) if "skipped" in f else np.ones(len(ids), bool)
    row_of = {int(i): r for r, i in enumerate(ids) if valid[r]}
    missing = [int(i) for i in image_ids if int(i) not in row_of]
    if missing:
        raise CapawareError(feats_h5, f"{len(missing)} of {len(image_ids)} {split} images of the labels have no "
                            f"features (image ids {missing[:5]})", "extract features from the captions' own images")
    return np.array([row_of[int(i)] for i in image_ids], dtype=np.int64), ids


def load_split(feats_h5: str | Path, labels_h5: str | Path, split: str, source: str = "fc") -> JointSplit:
    """One split's images (features of ``source``) and all their captions."""
    feats_h5, labels_h5 = Path(feats_h5), Path(labels_h5)
    if not feats_h5.is_file():
        raise CapawareError(feats_h5, "features file not found", "run the features stage, or set data.features")
    image_ids, captions = _labels_of(labels_h5, split)
    feats = features_of(feats_h5, image_ids, source, split)
    owner = np.concatenate([np.full(len(c), i) for i, c in enumerate(captions)])
    if any(len(c) == 0 for c in captions):
        raise CapawareError(labels_h5, f"a {split} image without captions", "rerun the captioners' prepro")
    return JointSplit(feats, torch.from_numpy(np.concatenate(captions)).long(), torch.from_numpy(owner).long(),
                      image_ids)


def features_of(feats_h5: str | Path, image_ids: np.ndarray, source: str = "fc", what: str = "") -> torch.Tensor:
    """float32 features (``source``: fc or att) of ``image_ids``, in their order; an id without features (absent or
    skipped) is one CapawareError line. ``what`` names the images in it (a split)."""
    feats_h5 = Path(feats_h5)
    if not feats_h5.is_file():
        raise CapawareError(feats_h5, "features file not found", "run the features stage, or set data.features")
    rows, _ = _feature_rows(feats_h5, np.asarray(image_ids), what)
    order = np.argsort(rows, kind="stable")  # h5py reads ascending rows; put them back in the ids' order
    with h5py.File(feats_h5, "r") as f:
        block = f[source][np.sort(rows)]
    feats = np.empty_like(block)
    feats[order] = block
    return torch.from_numpy(feats.astype(np.float32))


def feature_width(feats_h5: str | Path, source: str = "fc") -> int:
    with h5py.File(feats_h5, "r") as f:
        return int(f[source].shape[-1])
