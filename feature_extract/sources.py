"""Which images to dump (a Karpathy json or a folder) and how each becomes network input.

Decoding and resizing run in DataLoader workers; an image that fails to decode comes back as a
message instead of an exception, because a worker's exception reaches the main process as a
traceback, not as the one line the user needs (and ``skip_bad`` must be able to carry on).
"""
from __future__ import annotations

import hashlib
import json
import re
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from PIL import Image

from capcore.errors import CapawareError
from capdata.images import load_rgb
from capdata.captions import read_captions

IMAGE_SUFFIXES = (".jpg", ".jpeg", ".png", ".bmp", ".gif", ".webp", ".tif", ".tiff")


@dataclass
class ImageList:
    paths: list[Path]
    ids: np.ndarray  # int64 [N]
    names: list[str]  # paths relative to the root, stored in the file so a row can be traced back
    source: str  # the json or folder they came from
    root: str

    def __len__(self) -> int:
        return len(self.paths)

    def sha256(self) -> str:
        """Identity of the list (ids and names, in order): a resumed dump must see the same one."""
        return hashlib.sha256(json.dumps([self.ids.tolist(), self.names]).encode()).hexdigest()


def list_images(cfg) -> ImageList:
    """The ``images`` config section as an ordered list of files with integer ids."""
    if cfg.captions:

        records = read_captions(cfg.captions, cfg.format, cfg.image_root or None)
        keep = np.isin(records.splits, list(cfg.splits)) if cfg.splits else np.ones(len(records), bool)
        if not keep.any():
            raise CapawareError(cfg.captions, f"no image in splits {list(cfg.splits)}",
                                "set images.splits to splits the file has (or [] for all)")
        root = Path(cfg.image_root).resolve() if cfg.image_root else Path(cfg.captions).resolve().parent
        paths = [p for p, k in zip(records.image_paths, keep) if k]
        names = [_relative(p, root) for p in paths]
        return ImageList(paths, records.image_ids[keep].astype(np.int64), names, str(cfg.captions), str(root))
    root = Path(cfg.folder)
    if not root.is_dir():
        raise CapawareError(root, "image folder not found", "check images.folder")
    paths = sorted(p for p in root.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
    if not paths:
        raise CapawareError(root, f"no image files ({', '.join(IMAGE_SUFFIXES)}) in the folder",
                            "point images.folder at a folder of images")
    names = [_relative(p, root) for p in paths]
    return ImageList(paths, folder_ids(paths), names, str(root), str(root))


def _relative(path: Path, root: Path) -> str:
    try:
        return str(Path(path).relative_to(root))
    except ValueError:
        return str(path)


def name_number(path: Path) -> int | None:
    """The trailing digits of a file name (COCO_val2014_000000391895.jpg -> 391895), or None."""
    found = re.search(r"(\d+)$", Path(path).stem)
    return int(found.group(1)) if found else None


def same_number(paths: list[Path], numbers: list[int | None]) -> list[str]:
    """The first two names ending in the same number (``[]`` when no two do)."""
    seen: dict[int, str] = {}
    for p, n in zip(paths, numbers):
        if n is not None and n in seen:
            return [seen[n], Path(p).name]
        if n is not None:
            seen[n] = Path(p).name
    return []


def folder_ids(paths: list[Path], other_fix: str = "put them in two folders") -> np.ndarray:
    """Trailing digits of the file names (COCO_val2014_000000391895.jpg -> 391895), so ids match the COCO
    annotations; when no name ends in digits, the position in sorted order. Names of both kinds, or two names
    ending in the same number, are refused in one line: ids half from names and half from positions (or
    renumbered) would be scored against the wrong references without a word. (Features and ``capaware caption
    --ids names`` use it; ``capaware caption``'s default falls back to positions with a note instead.)"""
    found = [name_number(p) for p in paths]
    if all(n is None for n in found):
        return np.arange(len(paths), dtype=np.int64)
    plain = [p for p, n in zip(paths, found) if n is None]
    if plain:
        numbered = next(p for p, n in zip(paths, found) if n is not None)
        raise CapawareError(plain[0].parent, f"{len(paths) - len(plain)} image names end in digits (an image id, as "
                            f"{numbered.name}) and {len(plain)} do not (as {plain[0].name})",
                            f"name every image alike (all ending in its id, or none), or {other_fix}")
    twins = same_number(paths, found)
    if twins:
        raise CapawareError(paths[0].parent, f"{' and '.join(twins)} end in the same number, so they would share "
                            "an image id", "rename one of them")
    return np.array(found, dtype=np.int64)


def resize(image: Image.Image, policy: str, size: int) -> Image.Image:
    """square: size x size (aspect distorted); short_side: short side = size, aspect kept."""
    if policy == "square":
        return image.resize((size, size), Image.BILINEAR)
    w, h = image.size
    scale = size / min(w, h)
    return image.resize((max(1, round(w * scale)), max(1, round(h * scale))), Image.BILINEAR)


def prepare(path: str | Path, policy: str, size: int) -> torch.Tensor:
    """uint8 [H, W, 3] of the resized image (HWC: stacking these gives a channels_last batch)."""
    return torch.from_numpy(np.asarray(resize(load_rgb(path), policy, size), dtype=np.uint8).copy())


class ImageDataset(torch.utils.data.Dataset):
    """Item = (row, uint8 HWC tensor or None, None or the error as (where, problem, fix))."""

    def __init__(self, images: ImageList, rows: range, policy: str, size: int):
        self.images, self.rows, self.policy, self.size = images, rows, policy, size

    def __len__(self) -> int:
        return len(self.rows)

    def __getitem__(self, i: int):
        row = self.rows[i]
        try:
            return row, prepare(self.images.paths[row], self.policy, self.size), None
        except CapawareError as err:
            return row, None, (err.where, err.problem, err.fix or "")


def collate(items):
    """Keep the list: short_side images differ in shape, so batching happens after grouping."""
    return items
