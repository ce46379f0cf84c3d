"""From a config's ``data`` section to records, a label space and network-ready image tensors.

This is the only place that knows which reader and which label space go with which track, and the
only place that generates the embedded default when its folder is missing.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from capcore.errors import CapawareError
from capdata.images import load_rgb
from capdata.records import select
from embedder.config import FORMATS

IMAGENET_MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)

DEFAULT_ANNOTATION = {"pose_json": "poses.json", "karpathy": "dataset_coco.json",
                      "mpii": "mpii_human_pose_v1_u12_1.mat", "mpii_json": "annot", "lsun": ""}


def ensure_synthetic(data) -> None:
    """Generate the embedded default into ``data.root`` when it is missing and a generator is set.

    It is written into a ``.partial`` sibling and renamed when complete, so a run killed mid-way
    never leaves a half-filled ``data.root`` that a rerun would take for finished.
    """
    root = Path(data.root)
    if data.synthetic is None:
        return
    if root.exists():
        return
    from capdata import synthetic

    gen = {"pose": synthetic.generate_poses, "layout": synthetic.generate_rooms,
           "caption": synthetic.generate_captions}[data.track]
    s = data.synthetic
    partial = root.with_name(root.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    extra = {"n_val": s.n_val} if s.n_val is not None else {}  # caption sets only (the schema says)
    gen(partial, n_train=s.n_train, n_test=s.n_test, seed=s.seed, size=s.size, **extra)
    os.replace(partial, root)


def read_records(data):
    """Records of the whole dataset named by the ``data`` config section."""
    if data.format not in FORMATS.get(data.track, ()):
        raise CapawareError("data.format", f"format {data.format!r} does not fit track {data.track!r}",
                            f"use one of {FORMATS.get(data.track, ('pose', 'layout', 'caption'))}")
    ensure_synthetic(data)
    root = Path(data.root)
    annotation = root / (data.annotation or DEFAULT_ANNOTATION[data.format])
    if data.format == "pose_json":
        from capdata.readers.pose_json import read_pose_json
        return read_pose_json(annotation)
    if data.format == "mpii":
        from capdata.readers.mpii import read_mpii
        return read_mpii(annotation, Path(data.image_root) if data.image_root else root / "images",
                         split_file=root / data.split_file if data.split_file else None)
    if data.format == "mpii_json":  # annotation: the folder holding train.json / valid.json
        from capdata.readers.mpii_json import read_mpii_json
        return read_mpii_json(annotation, Path(data.image_root) if data.image_root else root / "images")
    if data.format == "lsun":
        from capdata.readers.lsun import read_lsun
        return read_lsun(root, layout_type=data.layout_type, labels=data.layout_labels)
    from capdata.readers.karpathy import read_karpathy
    return read_karpathy(annotation, Path(data.image_root) if data.image_root else None)


def split_records(records, splits: tuple[str, ...] | str):
    splits = (splits,) if isinstance(splits, str) else tuple(splits)
    return select(records, np.isin(records.splits, splits))


def load_image(records, i: int, size: int) -> np.ndarray:
    """uint8 [3, size, size]: the pose crop box, or the whole image, resized to the input frame."""
    image = load_rgb(records.image_paths[i])
    boxes = getattr(records, "boxes", None)
    if boxes is not None:
        image = image.crop(tuple(float(v) for v in boxes[i]))  # PIL pads outside the image with black
    image = image.resize((size, size), Image.BILINEAR)
    return np.asarray(image, dtype=np.uint8).transpose(2, 0, 1).copy()


@dataclass
class ImageBank:
    """Images of one split as network input; decoded once into RAM when ``in_memory``."""
    records: object
    size: int
    cache: torch.Tensor | None = None

    @classmethod
    def build(cls, records, size: int, in_memory: bool, desc: str = "images") -> "ImageBank":
        bank = cls(records, size)
        if in_memory:
            bank.cache = torch.from_numpy(np.stack([
                load_image(records, i, size) for i in tqdm(range(len(records)), desc=desc, leave=False)]))
        return bank

    def __len__(self) -> int:
        return len(self.records)

    def uint8(self, index: np.ndarray) -> torch.Tensor:
        if self.cache is not None:
            return self.cache[torch.as_tensor(index)]
        return torch.from_numpy(np.stack([load_image(self.records, int(i), self.size) for i in index]))

    def batch(self, index: np.ndarray, device: torch.device | str = "cpu") -> torch.Tensor:
        return normalise(self.uint8(index), device)


def normalise(images: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """uint8 [B, 3, S, S] -> float normalised with ImageNet statistics (what torchvision trunks expect)."""
    x = images.to(device).float().div_(255)
    return ((x - IMAGENET_MEAN.to(device)) / IMAGENET_STD.to(device)).contiguous(memory_format=torch.channels_last)
