"""In-memory records that every reader returns and every stage consumes.

Readers (``capdata.readers``) turn a release's own files (Karpathy json, MPII .mat, LSUN .mat, the
simple pose JSON) into one of these, so label spaces, samplers and datasets never see file formats.
All paths are absolute; arrays are aligned with ``image_paths``.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

MPII_JOINTS = (
    "r_ankle", "r_knee", "r_hip", "l_hip", "l_knee", "l_ankle", "pelvis", "thorax",
    "upper_neck", "head_top", "r_wrist", "r_elbow", "r_shoulder", "l_shoulder", "l_elbow", "l_wrist",
)
"""The 16 MPII joints, in the release's id order (joint id 0..15)."""

LAYOUT_SURFACES = ("ceiling", "floor", "left", "front", "right")
"""Our layout label ids 0..4 (docs/design.md). Readers map a release's own ids onto these."""


@dataclass
class PoseRecords:
    image_paths: list[Path]
    splits: np.ndarray  # [N] str: train | val | test
    joints: np.ndarray  # [N, 16, 2] float32, (x, y) in the original image's pixels
    visible: np.ndarray  # [N, 16] bool
    boxes: np.ndarray  # [N, 4] float32 square crop (x0, y0, x1, y1): the network sees this crop

    def __len__(self) -> int:
        return len(self.image_paths)


@dataclass
class LayoutRecords:
    image_paths: list[Path]
    splits: np.ndarray  # [N] str
    seg_paths: list[Path]  # per image segmentation map (release format; see capdata.readers.lsun)
    layout_types: np.ndarray  # [N] int, the LSUN layout type (0..10)
    corners: list[np.ndarray] | None = None  # per image [K, 2] (x, y) 0-based; K fixed by the type
    resolutions: np.ndarray | None = None  # [N, 2] int (H, W) as the split file says
    map_labels: str = "surfaces"  # how seg_paths' ids are numbered (capdata.readers.lsun: MAP_LABELS)

    def __len__(self) -> int:
        return len(self.image_paths)


@dataclass
class CaptionRecords:
    image_paths: list[Path]
    splits: np.ndarray  # [N] str: train | restval | val | test (Karpathy)
    image_ids: np.ndarray  # [N] int64, the COCO id (cocoid)
    captions: list[list[list[str]]]  # per image, per sentence, tokens (lower-case, as in Karpathy json)
    raw: list[list[str]] = field(default_factory=list)  # per image, per sentence, the raw string
    categories: list[list[str]] | None = None  # per image object categories (synthetic set only)
    attributes: list[dict[str, list[str]]] | None = None  # per image {group: values} (synthetic set only)
    objects: list[list[dict]] | None = None  # per image [{shape, colour, size, bbox px}] (synthetic set only)
    sizes: np.ndarray | None = None  # [N, 2] (width, height) in pixels, when the json gives them
    format: str | None = None  # the caption format that read them (capdata.formats): their split names, the
    # splits that train; set by the reading view (capdata.captions.read_captions, capdata.formats.read_records)

    def __len__(self) -> int:
        return len(self.image_paths)


def select(records, mask_or_index):
    """A new records object holding the rows picked by a boolean mask or an index array."""
    index = np.flatnonzero(mask_or_index) if np.asarray(mask_or_index).dtype == bool else np.asarray(mask_or_index)
    out = {}
    for name, value in vars(records).items():
        if value is None:
            out[name] = None
        elif isinstance(value, np.ndarray):
            out[name] = value[index]
        elif isinstance(value, list) and len(value) == len(records):
            out[name] = [value[i] for i in index]
        else:
            out[name] = value
    return type(records)(**out)
