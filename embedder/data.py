"""From records to network-ready image tensors: a split's images, decoded once, normalised as ImageNet's.

Records come from ``capdata.formats`` (which reader goes with which format, and the embedded default).
"""
from __future__ import annotations

import sys
from dataclasses import dataclass

import numpy as np
import torch
from PIL import Image
from tqdm import tqdm

from capdata.images import load_rgb
from capdata.records import select
from embedder.backbones import IMAGENET_NORM

IMAGENET_MEAN = torch.tensor(IMAGENET_NORM[0]).view(1, 3, 1, 1)
IMAGENET_STD = torch.tensor(IMAGENET_NORM[1]).view(1, 3, 1, 1)


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
    def build(cls, records, size: int, in_memory: bool | None, desc: str = "images") -> "ImageBank":
        """``in_memory``: decode once into RAM (True), per batch (False), or None: in RAM when it fits."""
        bank = cls(records, size)
        if in_memory is None:
            in_memory, why = fits_in_memory(len(records), size)
            print(f"{desc}: {why}", file=sys.stderr)
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


def fits_in_memory(n_images: int, size: int, share: float = 0.5) -> tuple[bool, str]:
    """(decode into RAM?, why): yes when the uint8 images take at most ``share`` of the memory this
    machine has available, split between the ranks on it. Decoding per batch costs about 9 ms an MPII
    photo at every step, which starves a GPU; decoding once costs the RAM (3 x S x S bytes an image)."""
    from capcore import machine

    need, memory = n_images * 3 * size * size, machine.available_memory()
    if memory is None:
        return False, f"decoded per batch ({need / 1e9:.1f} GB to hold; this machine does not report its memory)"
    room = share * memory / machine.local_processes()
    verdict = "decoded once into RAM" if need <= room else "decoded per batch"
    return need <= room, f"{verdict}: {n_images:,} images need {need / 1e9:.1f} GB, {room / 1e9:.1f} GB to spare"


def normalise(images: torch.Tensor, device: torch.device | str = "cpu") -> torch.Tensor:
    """uint8 [B, 3, S, S] -> float normalised with ImageNet statistics (what torchvision trunks expect)."""
    x = images.to(device).float().div_(255)
    return ((x - IMAGENET_MEAN.to(device)) / IMAGENET_STD.to(device)).contiguous(memory_format=torch.channels_last)
