"""Reader for MPII Human Pose in the JSON layout that HRNet and simple-baselines ship.

Why: many copies of MPII come as ``annot/train.json`` + ``annot/valid.json`` instead of the release's
``.mat`` (read by ``capdata.readers.mpii``). This reader gives the same records as ``read_mpii``
for the same people, so a run does not depend on which copy you have. The layout is a JSON list
with one entry per annotated person::

    [{"image": "015601864.jpg", "center": [594.0, 257.0], "scale": 3.021046,
      "joints": [[620.0, 394.0], ...16], "joints_vis": [1, ...16]}, ...]

What the values mean. The public files copy the release's ``objpos``, ``scale`` and points
unchanged (1-based), and HRNet's ``lib/dataset/mpii.py`` subtracts 1 from them when it loads them
(from HRNet's loader and published entries; not checked here against a full copy of MPII):

* ``joints`` and ``center`` are MATLAB 1-based pixel positions, as in the .mat. We subtract 1,
  as ``read_mpii`` does, so the output is 0-based.
* ``joints`` follows MPII joint id order (``capdata.records.MPII_JOINTS``).
* ``joints_vis`` is 1 for an annotated joint (occluded joints included) and 0 for an absent one.
  That is ``read_mpii``'s default ``visibility="annotated"``. These files do not hold MPII's
  ``is_visible`` flag, so they have no equivalent of ``visibility="is_visible"``. An absent joint
  becomes invisible at (0, 0), as in ``read_mpii``; the file's placeholder coordinates are ignored.
* box: a square of side ``box_scale * 200 * scale`` centred on ``center - 1``, as in ``read_mpii``.
  HRNet's own shift of the centre by ``15 * scale`` px is a training-time choice that we do not
  copy.
* split: ``train.json`` -> "train", ``valid.json`` -> "val". These are Tompson et al.'s validation
  people, which the .mat marks as training images; ``read_mpii`` gives them "val" only through
  ``split_file``. ``test.json`` (people without joints) and ``trainval.json`` (train and valid
  again) are not read.
* An entry with no annotated joint, or with no crop (``center`` [-1, -1] or ``scale`` <= 0), is
  skipped. ``read_mpii`` skips such persons too.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

from capcore.errors import CapawareError
from capdata.readers.entries import (
    N_JOINTS,
    check_entry,
    entry_error,
    number,
    pair,
    read_joints,
)
from capdata.readers.karpathy import read_json_file
from capdata.readers.mpii import PERSON_HEIGHT_PX, SPLITS
from capdata.records import PoseRecords

JSON_FILES = (("train.json", "train"), ("valid.json", "val"))
"""The files read from the annotation folder, in this order, and the split each one gives."""

REQUIRED = ("image", "center", "scale", "joints", "joints_vis")
_FIX = "fix or remove this entry (or re-download the MPII annot/*.json files)"


def _read_people(path: Path, split: str, image_root: Path, box_scale: float, out: dict) -> None:
    """Append the records of one annot/*.json file to ``out``'s lists."""
    data = read_json_file(path, "MPII JSON annotation file")
    if not isinstance(data, list):
        raise CapawareError(path, f"top level is a JSON {type(data).__name__}, not a list of person entries",
                            "use the annot/train.json or annot/valid.json of HRNet / simple-baselines")
    for n, entry in enumerate(data):
        bad = entry_error(path, n, entry, "image", label="entry", default_fix=_FIX)
        check_entry(entry, REQUIRED, bad)
        name = entry["image"]
        if not isinstance(name, str) or not name:
            raise bad(f"'image' {name!r} is not a file name")
        xy, vis = read_joints(entry["joints"], entry["joints_vis"], "joints_vis", bad,
                              "give all 16 joints, with joints_vis 0 for the absent ones")
        try:
            cx, cy = pair(entry["center"])
        except ValueError:
            raise bad(f"center {entry['center']!r} is not [x, y]") from None
        try:
            s = number(entry["scale"])
        except ValueError:
            raise bad(f"scale {entry['scale']!r} is not a number") from None

        if not any(vis):
            continue  # no annotated joint: read_mpii skips such a person too
        if (cx, cy) == (-1.0, -1.0) or not s > 0:
            continue  # no position/scale in the release: no crop can be made (read_mpii skips it)
        joints = np.zeros((N_JOINTS, 2), dtype=np.float32)
        visible = np.zeros(N_JOINTS, dtype=bool)
        for j, ((x, y), v) in enumerate(zip(xy, vis)):
            if v == 1:
                joints[j] = (x - 1.0, y - 1.0)  # MATLAB 1-based -> 0-based pixels
                visible[j] = True
        side = box_scale * PERSON_HEIGHT_PX * s
        cx, cy = cx - 1.0, cy - 1.0
        out["paths"].append(image_root / name)
        out["splits"].append(split)
        out["joints"].append(joints)
        out["visible"].append(visible)
        out["boxes"].append((cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2))


def read_mpii_json(
    annot_dir: str | Path,
    image_root: str | Path,
    split: str | None = None,
    box_scale: float = 1.25,
) -> PoseRecords:
    """One record per annotated person of ``annot_dir/train.json`` then ``annot_dir/valid.json``.

    Either file may be missing (a folder holding only valid.json is normal); ``split`` keeps one
    split ("train" | "val" | "test"), ``None`` keeps all. See the module docstring.
    """
    annot_dir = Path(annot_dir).resolve()
    image_root = Path(image_root).resolve()
    if split is not None and split not in SPLITS:
        raise CapawareError("split", f"unknown split {split!r}", f"use one of {', '.join(SPLITS)} or None")
    if not box_scale > 0:
        raise CapawareError("box_scale", f"must be positive, got {box_scale}", "use e.g. 1.25")
    fix = ("put MPII's annot/train.json and/or annot/valid.json (HRNet / simple-baselines layout) there, "
           "or set data.annotation to the folder holding them")
    if annot_dir.is_file():
        raise CapawareError(annot_dir, "is a file, but the mpii_json format reads a folder", fix)
    if not annot_dir.is_dir():
        raise CapawareError(annot_dir, "MPII JSON annotation folder not found", fix)
    present = [(annot_dir / name, s) for name, s in JSON_FILES if (annot_dir / name).is_file()]
    if not present:
        raise CapawareError(annot_dir, "holds neither train.json nor valid.json", fix)

    out: dict[str, list] = {"paths": [], "splits": [], "joints": [], "visible": [], "boxes": []}
    for path, file_split in present:
        if split is None or split == file_split:
            _read_people(path, file_split, image_root, box_scale, out)

    if not out["paths"]:
        what = f" in split {split!r}" if split else ""
        raise CapawareError(annot_dir, f"no annotated person{what} in {', '.join(p.name for p, _ in present)}",
                            "check split; train.json gives 'train', valid.json gives 'val'")
    return PoseRecords(
        image_paths=out["paths"], splits=np.array(out["splits"]),
        joints=np.stack(out["joints"]).astype(np.float32), visible=np.stack(out["visible"]),
        boxes=np.asarray(out["boxes"], dtype=np.float32),
    )
