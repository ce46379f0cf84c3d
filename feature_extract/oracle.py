"""Oracle features: each scene's ground truth laid on the captioners' grid, in the features-file format.

``python -m feature_extract.oracle --karpathy DATA/dataset_coco.json --out RUN/features/oracle.h5 [--att-size 4]``

Why: Table 1 asks whether caption-aware features help a captioner. Before reading Img against Cap, one must
know how much any feature set *could* add in this world: the oracle row is the ceiling. It is not a
network's output but the scene file itself (``objects`` of the synthetic Karpathy json), written cell by
cell on the grid the captioners attend over, and trained and scored by exactly the same XE/SCST recipe.

Channels of a cell (``CHANNELS`` names them, in order), over the objects whose centre lies in the cell:

- ``kind:<colour> <shape>`` counts (36), ``shape:<s>`` counts (6), ``colour:<c>`` counts (6), ``size:<s>``
  counts (2), ``count`` (objects in the cell): what the captions name, and how many;
- ``x``, ``y``: the mean centre of those objects, in image fractions (0 for an empty cell): where they are,
  since the captioners add no positional encoding of their own;
- ``background:<b>`` one-hot (4), in every cell: the captions name it, and it belongs to no object.

``fc`` is the scene as a whole on the same channels: counts summed over cells, ``x``/``y`` the mean centre of all
objects, the background once. Not the mean over cells, as the trunks' ``fc`` is: that divides every count by G^2,
and Top-Down, which reads ``fc`` at every word, then learned from a signal 16 times weaker than the grid's (its
XE CIDEr-D fell below Img's on the 4 x 4 demo grid while Att2all2, which reads the grid alone, rose). The file carries
the features file's identity attributes with ``backbone: oracle``, so tables label the row "Oracle" from the file
itself.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import shlex
import sys
from pathlib import Path

import h5py
import numpy as np

from capcore.errors import CapawareError, run_cli
from capdata.captions import read_captions
from capdata.synthetic.shapes_captions import BACKGROUNDS, COLOURS, SHAPES, SIZES
from feature_extract import h5io

KINDS = [f"{c} {s}" for c in COLOURS for s in SHAPES]
CHANNELS = ([f"kind:{k}" for k in KINDS] + [f"shape:{s}" for s in SHAPES] + [f"colour:{c}" for c in COLOURS]
            + [f"size:{s}" for s in SIZES] + ["count", "x", "y"] + [f"background:{b}" for b in BACKGROUNDS])
INDEX = {name: i for i, name in enumerate(CHANNELS)}


def cell_of(cx: float, cy: float, width: float, height: float, g: int) -> int:
    """Row-major index of the g x g cell holding the point (the layout of ``att``: H then W)."""
    row, col = min(g - 1, int(g * cy / height)), min(g - 1, int(g * cx / width))
    return row * g + col


def scene_grid(objects: list[dict], background: str, width: float, height: float, g: int) -> np.ndarray:
    """[g*g, len(CHANNELS)] float32 of one scene (module docstring)."""
    att = np.zeros((g * g, len(CHANNELS)), np.float32)
    xy = np.zeros((g * g, 2), np.float64)
    for o in objects:
        x, y, w, h = o["bbox"]
        cx, cy = x + w / 2, y + h / 2
        k = cell_of(cx, cy, width, height, g)
        for name in (f"kind:{o['colour']} {o['shape']}", f"shape:{o['shape']}", f"colour:{o['colour']}",
                     f"size:{o['size']}", "count"):
            att[k, INDEX[name]] += 1
        xy[k] += (cx / width, cy / height)
    filled = att[:, INDEX["count"]] > 0
    att[filled, INDEX["x"]] = xy[filled, 0] / att[filled, INDEX["count"]]
    att[filled, INDEX["y"]] = xy[filled, 1] / att[filled, INDEX["count"]]
    att[:, INDEX[f"background:{background}"]] = 1
    return att


def scene_vector(att: np.ndarray) -> np.ndarray:
    """[N, C] from [N, G*G, C]: counts summed over cells, the objects' mean centre, the background once."""
    fc = att.sum(1)
    counts = att[..., INDEX["count"]]
    for axis in ("x", "y"):
        fc[:, INDEX[axis]] = (att[..., INDEX[axis]] * counts).sum(1) / np.maximum(counts.sum(1), 1)
    fc[:, INDEX["y"] + 1:] = att[:, 0, INDEX["y"] + 1:]  # the background, as every cell holds it
    return fc


def oracle_features(karpathy: str | Path, g: int) -> tuple[np.ndarray, np.ndarray, list[str]]:
    """(att [N, g*g, C], image ids [N], image file names [N]) of every image of the json, in file order."""
    records = read_captions(karpathy)  # the synthetic set's Karpathy json: only it has scene objects
    if records.objects is None or records.attributes is None or records.sizes is None:
        raise CapawareError(karpathy, "the caption set has no per-image 'objects', 'attributes' and width/height",
                            "oracle features need the synthetic shapes-captions set "
                            "(runs/demo/data/captions/dataset_coco.json)")
    att = np.stack([scene_grid(objs, attrs["background"][0], w, h, g)
                    for objs, attrs, (w, h) in zip(records.objects, records.attributes, records.sizes)])
    root = Path(karpathy).resolve().parent
    names = [str(Path(p).resolve().relative_to(root)) if Path(p).resolve().is_relative_to(root) else str(p)
             for p in records.image_paths]
    return att, records.image_ids.astype(np.int64), names


def check_existing(out: str | Path, karpathy: str | Path, g: int) -> None:
    """An oracle file already at ``out`` must come from these scene files on this grid (else one line)."""
    with h5io.open_features(out) as f:
        same = (f.attrs.get("backbone") == "oracle" and f.attrs.get("att_size") == g
                and f.attrs.get("checkpoint_sha256") == hashlib.sha256(Path(karpathy).read_bytes()).hexdigest())
    if not same:
        raise CapawareError(out, "holds features of another caption set, grid or backbone", h5io.FORCE_FIX)


def write_oracle(karpathy: str | Path, out: str | Path, g: int, command: str = "") -> Path:
    """Write the file whole (``<out>.partial``, then renamed): a reader never sees half of it."""
    att, ids, names = oracle_features(karpathy, g)
    digest = hashlib.sha256(Path(karpathy).read_bytes()).hexdigest()
    attrs = {"format": h5io.FORMAT, "backbone": "oracle", "backbone_method": "scene ground truth",
             "arch": "none", "checkpoint": str(karpathy), "checkpoint_sha256": digest,
             "input_policy": "none", "input_size": 0, "att_size": g, "channels": len(CHANNELS),
             "dtype": "float32", "compression": "none", "precision": "float32", "images": str(karpathy),
             "image_root": str(Path(karpathy).resolve().parent), "splits": h5io.splits_attr([]),
             "images_sha256": hashlib.sha256(json.dumps([ids.tolist(), names]).encode()).hexdigest(),
             "n_images": len(ids), "channel_names": json.dumps(CHANNELS), "command": command}
    out = Path(out)
    partial = h5io.partial_path(out)
    h5io.create(partial, attrs, ids, names)
    try:
        with h5py.File(partial, "r+") as f:
            f["att"][:] = att
            f["fc"][:] = scene_vector(att)
            f.attrs["n_done"] = len(ids)
            f.attrs["complete"] = True
        os.replace(partial, out)
    finally:
        partial.unlink(missing_ok=True)
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--karpathy", required=True, help="the synthetic set's dataset_coco.json")
    parser.add_argument("--out", required=True, help="features file to write (e.g. RUN/features/oracle.h5)")
    parser.add_argument("--att-size", type=int, default=4, help="grid side: the captioners' grid (demo: 4)")
    a = parser.parse_args(argv)
    if a.att_size < 1:
        raise CapawareError("--att-size", f"must be >= 1, got {a.att_size}", "give the captioners' grid side")
    command = " ".join(shlex.quote(x) for x in ["python", "-m", "feature_extract.oracle",
                                                *(argv if argv is not None else sys.argv[1:])])
    out = write_oracle(a.karpathy, a.out, a.att_size, command)
    print(f"oracle features -> {out} ({a.att_size} x {a.att_size} grid, {len(CHANNELS)} channels)")


if __name__ == "__main__":
    run_cli(main)
