"""Layout label space: D(y_a, y_b) = 1 - mIoU of the two surface segmentation maps.

mIoU averages IoU over the surfaces present in at least one of the two maps (a surface absent from
both says nothing about their difference). Maps are compared at the network's input resolution
(nearest-neighbour resize), which is where the paper's images are compared too.
"""
from __future__ import annotations

import numpy as np
from PIL import Image
from tqdm import tqdm

from capdata.records import LAYOUT_SURFACES, LayoutRecords

N_SURFACES = len(LAYOUT_SURFACES)


def resize_map(seg: np.ndarray, size: int) -> np.ndarray:
    if seg.shape == (size, size):
        return seg
    return np.asarray(Image.fromarray(seg).resize((size, size), Image.NEAREST))


def one_hot(maps: np.ndarray) -> np.ndarray:
    """[N, H, W] ids 0..4 -> [N, 5, H*W] float32 indicator."""
    flat = maps.reshape(len(maps), -1)
    return (flat[:, None, :] == np.arange(N_SURFACES)[None, :, None]).astype(np.float32)


def layout_distance(onehot_a: np.ndarray, onehot_b: np.ndarray) -> np.ndarray:
    """[A, B] 1 - mIoU from one-hot maps; intersections by one matrix product per surface."""
    inter = np.einsum("acp,bcp->abc", onehot_a, onehot_b, optimize=True)  # [A, B, 5]
    area_a, area_b = onehot_a.sum(-1), onehot_b.sum(-1)  # [A, 5], [B, 5]
    union = area_a[:, None, :] + area_b[None, :, :] - inter
    present = union > 0
    iou = np.where(present, inter / np.maximum(union, 1), 0.0)
    miou = iou.sum(-1) / np.maximum(present.sum(-1), 1)
    return (1.0 - miou).astype(np.float32)


class LayoutSpace:
    name = "layout"

    def __init__(self, records: LayoutRecords, input_size: int, progress: bool = True):
        from capdata.readers.lsun import record_layout_map

        maps = [resize_map(record_layout_map(records, i), input_size)
                for i in tqdm(range(len(records)), desc="layout maps", disable=not progress, leave=False)]
        self.onehot = one_hot(np.stack(maps)) if maps else np.zeros((0, N_SURFACES, 0), np.float32)
        self.input_size = input_size

    def __len__(self) -> int:
        return len(self.onehot)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return layout_distance(self.onehot[rows], self.onehot[cols])

    def params(self) -> dict:
        return {"distance": "1 - mIoU over surfaces present in either map", "input_size": self.input_size}
