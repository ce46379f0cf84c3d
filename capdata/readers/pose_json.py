"""Reader for capaware's simple pose JSON (docs/design.md, "Files between the stages"): what the synthetic generator
writes and what a
user converts their own pose data into::

    {"joint_names": ["r_ankle", ...],            # optional; if present must equal MPII_JOINTS
     "images": [{"file": "img/0001.png",         # relative to the json's folder
                 "split": "train",               # train | val | test
                 "width": 256, "height": 192,     # optional: read from the image when both are absent
                 "joints": [[x, y] x 16],         # MPII joint order, original image pixels
                 "visible": [0|1 x 16],
                 "box": [x0, y0, x1, y1]}]}       # optional square crop the network sees

Without a box the crop is the whole image made square around its centre (side = max(W, H)), so a
pose's pixel distances are measured in a frame of known size.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from capcore.errors import CapawareError
from capdata.readers.entries import (
    N_JOINTS,
    check_entry,
    entry_error,
    number,
    read_joints,
)
from capdata.readers.karpathy import read_json_file
from capdata.records import MPII_JOINTS, PoseRecords

POSE_SPLITS = ("train", "val", "test")


def default_box(width: float, height: float) -> list[float]:
    """The whole image as a square crop centred on it (side = max(W, H); it may overhang)."""
    side = max(width, height)
    cx, cy = width / 2.0, height / 2.0
    return [cx - side / 2.0, cy - side / 2.0, cx + side / 2.0, cy + side / 2.0]


def _image_size(image_path: Path) -> tuple[float, float]:
    """(width, height) from the image file's header (no pixel decoding); ValueError(reason) if unreadable."""
    try:
        with Image.open(image_path) as im:
            width, height = im.size
    except FileNotFoundError:
        raise ValueError("image not found") from None
    except IsADirectoryError:
        raise ValueError("the path is a folder") from None
    except UnidentifiedImageError:
        raise ValueError("not a known image format, or corrupt") from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        raise ValueError(str(err).splitlines()[0] if str(err) else type(err).__name__) from None
    if not (width > 0 and height > 0):
        raise ValueError(f"image size {width}x{height} is not positive")
    return float(width), float(height)


def _explicit_box(img: dict, bad) -> list[float]:
    """The entry's own ``box`` as four numbers, refused when malformed or empty: the crop the network
    sees comes straight from it, so a swapped corner must fail here, not as a blank crop later."""
    box = img["box"]
    try:
        if not isinstance(box, list) or len(box) != 4:
            raise ValueError(box)
        box = [number(b) for b in box]
    except ValueError:
        raise bad(f"box {img['box']!r} is not [x0, y0, x1, y1]") from None
    if box[2] <= box[0] or box[3] <= box[1]:
        raise bad(f"box {box} is empty (need x1 > x0 and y1 > y0)")
    return box


def _measured_box(image_path: Path, bad) -> list[float]:
    """The default crop of an entry with neither box nor size, from the image file's header: the
    pose distances need a frame of known size, and the file on disk is the only place left to ask."""
    try:
        w, h = _image_size(image_path)
    except ValueError as err:
        raise bad(f"no 'box' nor 'width'/'height', and the image cannot be opened to measure it "
                  f"({err.args[0]})",
                  "give width and height (or a box), or put the image at that path") from None
    return default_box(w, h)


def _sized_box(img: dict, bad) -> list[float]:
    """The default crop from the entry's ``width``/``height``, which must come together: one alone is
    more likely a typo than a wish to measure the other from the image."""
    for key in ("width", "height"):
        if key not in img:
            raise bad(f"missing '{key}' (give width and height together, a box, or neither to "
                      "read them from the image)")
    try:
        w, h = number(img["width"]), number(img["height"])
    except ValueError:
        raise bad("width/height are not numbers") from None
    if w <= 0 or h <= 0:
        raise bad(f"image size {w}x{h} is not positive")
    return default_box(w, h)


def _entry_box(img: dict, folder: Path, bad) -> list[float]:
    """The crop of one image entry: its box, else the square around its stated size, else around the
    size read from the image itself (the three ways the format allows, in that order of precedence)."""
    if "box" in img:
        return _explicit_box(img, bad)
    if "width" not in img and "height" not in img:  # measure the image itself (its header only)
        return _measured_box(folder / str(img["file"]), bad)
    return _sized_box(img, bad)


def read_pose_json(path: str | Path) -> PoseRecords:
    """Every image of a pose JSON file as PoseRecords (absolute paths, float32 joints)."""
    path = Path(path).resolve()
    data = read_json_file(path, "pose annotation file")
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise CapawareError(path, "no 'images' list at the top level",
                            "see docs/data_formats/pose.md for the pose JSON format")
    names = data.get("joint_names")
    if names is not None and list(names) != list(MPII_JOINTS):
        raise CapawareError(path, f"joint_names {names} are not the 16 MPII joints in id order",
                            "reorder the joints to capdata.records.MPII_JOINTS")

    paths, splits, joints, visible, boxes = [], [], [], [], []
    for i, img in enumerate(data["images"]):
        bad = entry_error(path, i, img, "file")
        check_entry(img, ("file", "split", "joints", "visible"), bad)
        if img["split"] not in POSE_SPLITS:
            raise bad(f"unknown split {img['split']!r} (expected one of {', '.join(POSE_SPLITS)})")
        xy, vis = read_joints(img["joints"], img["visible"], "visible", bad,
                              "give all 16 joints; mark the unannotated ones invisible")
        box = _entry_box(img, path.parent, bad)

        paths.append(path.parent / str(img["file"]))
        splits.append(img["split"])
        joints.append(xy)
        visible.append([bool(v) for v in vis])
        boxes.append(box)

    if not paths:
        raise CapawareError(path, "the 'images' list is empty", "point at a non-empty pose file")
    return PoseRecords(
        image_paths=paths, splits=np.array(splits),
        joints=np.asarray(joints, dtype=np.float32).reshape(-1, N_JOINTS, 2),
        visible=np.asarray(visible, dtype=bool).reshape(-1, N_JOINTS),
        boxes=np.asarray(boxes, dtype=np.float32).reshape(-1, 4),
    )
