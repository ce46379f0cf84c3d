"""Reader for the MPII Human Pose release ``mpii_human_pose_v1_u12_1.mat`` (Andriluka et al., CVPR 2014).

The file holds one MATLAB struct ``RELEASE`` with, per image i (1-based in MATLAB):
``annolist(i).image.name`` (file name under ``images/``), ``annolist(i).annorect(k)`` per person
(head box ``x1, y1, x2, y2``; ``annopoints.point(j)`` with ``x, y, id`` (0..15, MPII_JOINTS order)
and ``is_visible``; ``scale``; ``objpos.x/.y``), ``img_train(i)`` (1 train, 0 test),
``single_person{i}`` (annorect indices of well separated people), ``act(i)``, ``video_list``.

Quirks of the real file as scipy reads it with ``struct_as_record=False, squeeze_me=True``
(checked against public converters: HMR's ``mpii_to_tfrecords.py``, datumaro's and pose-hg's
readers): a 1x1 struct array comes back as a bare struct, not an array (one person, one point);
``annorect`` may be empty or lack the ``annopoints``/``objpos``/``scale`` fields altogether (when
no person of the image has them); ``annopoints`` may be ``[]``; ``is_visible`` is a number, a
one-character string ('0'/'1'), or ``[]``; a person's point list often holds fewer than 16 points
(joints outside the image are simply absent).

Conventions applied here:

* Coordinates are MATLAB 1-based; we subtract 1 so joints and boxes are 0-based pixel positions
  like every other reader (the same shift HRNet/pose-hg converters make).
* ``visible`` (our "usable in the label distance" flag) by default means *annotated*: an occluded
  joint still has its true location and MPII's own PCKh scores every annotated joint.
  ``visibility="is_visible"`` also requires ``is_visible == 1`` (missing or empty counts as 0).
  Absent joints are invisible, with coordinates 0.
* The crop the network sees: a square centred at ``objpos`` with side ``box_scale * 200 * scale``.
  MPII's ``scale`` is the person's height over 200 px (the dataset's normalisation convention,
  used by all MPII pipelines); ``box_scale`` (default 1.25, as in pose-hg/HRNet) adds context.
* Split: ``img_train == 1`` -> "train", else "test". The public release has no joints for test
  images, so in practice they yield no records. The thin-slicing protocol the paper follows
  (Kwak et al.) splits the *annotated* images into its own train/test: pass ``split_file`` (JSON
  ``{"image name": "train"|"val"|"test"}`` or text lines ``<image name> <split>``); images it does
  not list are then skipped.
* Persons without annopoints, or without ``objpos``/``scale`` (no crop can be made), are skipped.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import Literal

import numpy as np
import scipy.io

from capcore.errors import CapawareError
from capdata.records import MPII_JOINTS, PoseRecords

PERSON_HEIGHT_PX = 200.0
"""MPII's ``scale`` is the person's height in units of 200 px."""

N_JOINTS = len(MPII_JOINTS)
SPLITS = ("train", "val", "test")


def load_mat_file(path: str | Path, what: str) -> dict:
    """``scipy.io.loadmat`` (struct objects, squeezed) with one-line errors naming the file."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, f"{what} not found", "check the path (or download the file)")
    try:
        return scipy.io.loadmat(str(path), struct_as_record=False, squeeze_me=True)
    except NotImplementedError:  # MATLAB v7.3 files are HDF5
        raise CapawareError(path, "MATLAB v7.3 (HDF5) .mat files are not supported",
                            "re-save it in MATLAB with save(..., '-v7')") from None
    except Exception as err:  # scipy raises ValueError, MatReadError, TypeError, OSError, ...
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CapawareError(path, f"cannot read .mat file ({reason})",
                            f"re-download the {what}; it is truncated or not a .mat file") from None


def as_list(value) -> list:
    """A MATLAB struct array as a list: squeeze_me turns 1x1 into a bare struct and 0x0 into []."""
    if value is None:
        return []
    if isinstance(value, np.ndarray):
        return list(value.ravel())
    return [value]


def scalar(value) -> float | None:
    """A MATLAB number that may arrive as int, float, numpy scalar, '1' string or empty array."""
    if value is None:
        return None
    if isinstance(value, np.ndarray):
        if value.size != 1:
            return None
        value = value.item()
    if isinstance(value, (str, bytes)):
        try:
            return float(value) if value.strip() else None
        except ValueError:
            return None
    try:
        return float(value)
    except (TypeError, ValueError):
        return None


def _read_split_file(path: str | Path) -> dict[str, str]:
    """Image name -> split, from JSON or from ``<name> <split>`` lines."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "split file not found", "check the path")
    text = path.read_text(encoding="utf-8")
    if path.suffix.lower() == ".json":
        try:
            mapping = json.loads(text)
        except json.JSONDecodeError as err:
            raise CapawareError(path, f"not valid JSON ({err.msg} at line {err.lineno})",
                                'write {"image.jpg": "train", ...}') from None
        if not isinstance(mapping, dict):
            raise CapawareError(path, "must hold one object mapping image names to splits",
                                'write {"image.jpg": "train", ...}')
    else:
        mapping = {}
        for n, line in enumerate(text.splitlines(), 1):
            parts = line.split()
            if not parts or parts[0].startswith("#"):
                continue
            if len(parts) != 2:
                raise CapawareError(path, f"line {n} is not '<image name> <split>'", "fix the line")
            mapping[parts[0]] = parts[1]
    for name, split in mapping.items():
        if split not in SPLITS:
            raise CapawareError(path, f"image {name}: unknown split {split!r} (expected one of {', '.join(SPLITS)})",
                                "fix the split name")
    return mapping


def _check_options(split: str | None, visibility: str, box_scale: float) -> None:
    """Reject a bad argument before the (large, slow) .mat file is loaded, so a typo costs nothing."""
    if split is not None and split not in SPLITS:
        raise CapawareError("split", f"unknown split {split!r}", f"use one of {', '.join(SPLITS)} or None")
    if visibility not in ("annotated", "is_visible"):
        raise CapawareError("visibility", f"unknown mode {visibility!r}", "use 'annotated' or 'is_visible'")
    if not box_scale > 0:
        raise CapawareError("box_scale", f"must be positive, got {box_scale}", "use e.g. 1.25")


def _load_release(mat_path: Path, single_person_only: bool) -> tuple[list, np.ndarray, list | None]:
    """(annolist, img_train, single_person or None) of the file's RELEASE struct.

    Checked up front that the per-image arrays line up, so the per-person loop can index them blindly
    and a damaged or foreign .mat file fails with one line instead of an IndexError deep inside.
    """
    mat = load_mat_file(mat_path, "MPII annotation file")
    release = mat.get("RELEASE")
    if release is None:
        found = ", ".join(k for k in mat if not k.startswith("__")) or "none"
        raise CapawareError(mat_path, f"no variable RELEASE (variables: {found})",
                            "pass mpii_human_pose_v1_u12_1.mat from the MPII release")
    for key in ("annolist", "img_train"):
        if not hasattr(release, key):
            raise CapawareError(mat_path, f"RELEASE has no field '{key}'",
                                "pass mpii_human_pose_v1_u12_1.mat from the MPII release")
    annolist = as_list(release.annolist)
    img_train = np.atleast_1d(np.asarray(release.img_train)).ravel()
    if len(img_train) != len(annolist):
        raise CapawareError(mat_path,
                            f"RELEASE.img_train has {len(img_train)} entries but annolist has {len(annolist)}",
                            "the file is damaged; re-download it")
    single = as_list(getattr(release, "single_person", None)) if single_person_only else None
    if single_person_only and len(single) != len(annolist):
        raise CapawareError(mat_path, "RELEASE.single_person does not match annolist",
                            "re-download the file or set single_person_only=False")
    return annolist, img_train, single


def _image_split(name: str, train_flag, split_map: dict[str, str] | None) -> str | None:
    """The split of one image: the split file's word when one is given (None: not listed, skip the
    image), else the release's own img_train flag (1 train, anything else test)."""
    if split_map is not None:
        return split_map.get(name)
    return "train" if scalar(train_flag) == 1 else "test"


def _person_crop(rect) -> tuple[float, float, float] | None:
    """(cx, cy, scale) of one annorect in MATLAB 1-based pixels, or None when the release lacks the
    position or a positive scale: without them no crop can be made, so the person is skipped."""
    objpos = getattr(rect, "objpos", None)
    cx, cy = scalar(getattr(objpos, "x", None)), scalar(getattr(objpos, "y", None))
    s = scalar(getattr(rect, "scale", None))
    if cx is None or cy is None or s is None or not s > 0:
        return None
    return cx, cy, s


def _person_joints(points: list, visibility: str, where: str, mat_path: Path) -> tuple[np.ndarray, np.ndarray]:
    """(16 x 2 joints in 0-based pixels, 16 visible flags) of one person's point list.

    Absent joints stay invisible at (0, 0); a point without id/x/y or with an id outside 0..15 means the
    file is not what it claims, so it fails naming the image and person (``where``) rather than guessing.
    """
    xy = np.zeros((N_JOINTS, 2), dtype=np.float32)
    vis = np.zeros(N_JOINTS, dtype=bool)
    for p in points:
        jid, x, y = scalar(getattr(p, "id", None)), scalar(getattr(p, "x", None)), scalar(getattr(p, "y", None))
        if jid is None or x is None or y is None:
            raise CapawareError(mat_path, f"{where}: a point lacks id/x/y", "the file is damaged; re-download it")
        if jid != int(jid) or not 0 <= jid < N_JOINTS:
            raise CapawareError(mat_path, f"{where}: joint id {jid:g} outside 0..{N_JOINTS - 1}",
                                "this is not an MPII annotation file")
        j = int(jid)
        xy[j] = (x - 1.0, y - 1.0)  # MATLAB 1-based -> 0-based pixels
        if visibility == "annotated":
            vis[j] = True
        else:
            vis[j] = scalar(getattr(p, "is_visible", None)) == 1
    return xy, vis


def _image_people(ann, i: int, name: str, keep: set[int] | None, visibility: str, box_scale: float,
                  mat_path: Path) -> list[tuple[np.ndarray, np.ndarray, tuple[float, float, float, float]]]:
    """(joints, visible, box) of every usable person of image ``i`` (0-based), in annorect order.

    ``keep`` (1-based annorect indices, from single_person) limits the people; a person without points
    (not annotated, or a test image) or without a crop is skipped, as the module docstring says.
    """
    people = []
    for k, rect in enumerate(as_list(getattr(ann, "annorect", None))):
        if keep is not None and (k + 1) not in keep:
            continue
        points = as_list(getattr(getattr(rect, "annopoints", None), "point", None))
        if not points:
            continue  # person not annotated (or a test image)
        crop = _person_crop(rect)
        if crop is None:
            continue  # no position/scale: no crop can be made for this person
        xy, vis = _person_joints(points, visibility, f"image {i + 1} ({name}), person {k + 1}", mat_path)
        cx, cy, s = crop
        side = box_scale * PERSON_HEIGHT_PX * s
        cx, cy = cx - 1.0, cy - 1.0
        people.append((xy, vis, (cx - side / 2, cy - side / 2, cx + side / 2, cy + side / 2)))
    return people


def read_mpii(
    mat_path: str | Path,
    image_root: str | Path,
    split: str | None = None,
    split_file: str | Path | None = None,
    box_scale: float = 1.25,
    visibility: Literal["annotated", "is_visible"] = "annotated",
    single_person_only: bool = False,
) -> PoseRecords:
    """One record per annotated person of the MPII release (see the module docstring).

    ``split`` keeps one split ("train" | "val" | "test"), ``None`` keeps all.
    """
    mat_path = Path(mat_path).resolve()
    image_root = Path(image_root).resolve()
    _check_options(split, visibility, box_scale)
    split_map = _read_split_file(split_file) if split_file is not None else None
    annolist, img_train, single = _load_release(mat_path, single_person_only)

    paths, splits, joints_out, visible_out, boxes = [], [], [], [], []
    for i, ann in enumerate(annolist):
        name = getattr(getattr(ann, "image", None), "name", None)
        if not isinstance(name, str) or not name:
            raise CapawareError(mat_path, f"annolist({i + 1}) has no image.name", "the file is damaged; re-download it")
        image_split = _image_split(name, img_train[i], split_map)
        if image_split is None or (split is not None and image_split != split):
            continue
        keep = None
        if single is not None:
            keep = {int(k) for k in np.atleast_1d(np.asarray(single[i], dtype=float)).ravel() if np.isfinite(k)}
        for xy, vis, box in _image_people(ann, i, name, keep, visibility, box_scale, mat_path):
            paths.append(image_root / name)
            splits.append(image_split)
            joints_out.append(xy)
            visible_out.append(vis)
            boxes.append(box)

    if not paths:
        what = f" in split {split!r}" if split else ""
        raise CapawareError(mat_path, f"no annotated person{what}",
                            "check split/split_file; MPII test images carry no joints")
    return PoseRecords(
        image_paths=paths, splits=np.array(splits),
        joints=np.stack(joints_out).astype(np.float32), visible=np.stack(visible_out),
        boxes=np.asarray(boxes, dtype=np.float32),
    )
