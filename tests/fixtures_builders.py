"""Tiny fixtures in the *real* file structures (Karpathy json, pose json, MPII .mat, LSUN .mat).

Each ``write_*`` function writes into a folder (a pytest ``tmp_path``) and returns the path(s) a
reader takes. What they write is spelled out in module constants so a test can check parsed values
against them, not just shapes. Used by tests/capdata/test_readers.py and by any test that needs real-format
input; deterministic and fast (a few KB, no randomness except ``write_corrupt_image``'s fixed seed).
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image

from capdata.records import MPII_JOINTS

# --------------------------------------------------------------------------------------- images


def write_image(path: str | Path, size: tuple[int, int] = (8, 6), color=(200, 30, 60)) -> Path:
    """A small solid RGB image (format from the suffix: .jpg, .png)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", size, color).save(path)
    return path


def write_corrupt_image(path: str | Path, nbytes: int = 256, seed: int = 0) -> Path:
    """Random bytes under an image name: what a truncated download or a wrong file looks like."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(np.random.default_rng(seed).integers(0, 256, nbytes, dtype=np.uint8).tobytes())
    return path


def write_truncated_image(path: str | Path, size: tuple[int, int] = (64, 48), keep: float = 0.6) -> Path:
    """A real image (textured, format from the suffix) cut after ``keep`` of its bytes: the header is
    intact and PIL opens it, only decoding the pixel data fails (an interrupted download)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(1)
    Image.fromarray(rng.integers(0, 256, (size[1], size[0], 3), dtype=np.uint8)).save(path)
    data = path.read_bytes()
    path.write_bytes(data[: int(len(data) * keep)])
    return path


# ----------------------------------------------------------------------------- Karpathy captions

KARPATHY_IMAGES = [
    {"filepath": "train2014", "filename": "COCO_train2014_000000000009.jpg", "imgid": 0, "cocoid": 9,
     "split": "train", "categories": ["bowl", "broccoli"],
     "sentences": [
         {"tokens": ["a", "bowl", "of", "broccoli"], "raw": "A bowl of broccoli.", "sentid": 0},
         {"tokens": ["green", "vegetables", "in", "a", "dish"], "raw": "Green vegetables in a dish", "sentid": 1},
     ]},
    {"filepath": "val2014", "filename": "COCO_val2014_000000000042.jpg", "imgid": 1, "cocoid": 42,
     "split": "restval", "categories": ["dog"],
     "sentences": [{"tokens": ["a", "dog", "runs"], "raw": "A dog runs.", "sentid": 2}]},
    {"filepath": "val2014", "filename": "COCO_val2014_000000000073.jpg", "imgid": 2, "cocoid": 73,
     "split": "val", "categories": ["motorcycle", "person"],
     "sentences": [
         {"tokens": ["a", "man", "on", "a", "motorcycle"], "raw": "A man on a motorcycle", "sentid": 3},
         {"tokens": ["a", "person", "riding", "a", "bike"], "raw": "A person riding a bike.", "sentid": 4},
         {"tokens": ["motorbike", "parked"], "raw": "Motorbike parked", "sentid": 5},
     ]},
    {"filepath": "val2014", "filename": "COCO_val2014_000000000074.jpg", "imgid": 3, "cocoid": 74,
     "split": "test", "categories": [],
     "sentences": [{"tokens": ["a", "cat"], "raw": "A cat", "sentid": 6}]},
]
"""The images ``write_karpathy`` writes, in file order (``sentids`` are added on writing)."""


def write_karpathy(folder: str | Path, with_categories: bool = False, write_images: bool = True,
                   images: list[dict] | None = None, name: str = "dataset_coco.json") -> Path:
    """``folder/dataset_coco.json`` (+ the images under ``folder/<filepath>/``); returns the json path.

    ``images`` replaces KARPATHY_IMAGES (to write a broken entry); ``categories`` are dropped unless
    ``with_categories`` (the real COCO file has none; our synthetic set writes them).
    """
    folder = Path(folder)
    entries = []
    for img in (KARPATHY_IMAGES if images is None else images):
        img = json.loads(json.dumps(img))  # deep copy
        if not with_categories:
            img.pop("categories", None)
        if isinstance(img.get("sentences"), list):
            img["sentids"] = [s.get("sentid") for s in img["sentences"] if isinstance(s, dict)]
            for s in img["sentences"]:
                if isinstance(s, dict):
                    s["imgid"] = img.get("imgid")
        entries.append(img)
        if write_images and "filename" in img:
            write_image(folder / img.get("filepath", "") / img["filename"])
    path = folder / name
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps({"images": entries, "dataset": "coco"}))
    return path


# ------------------------------------------------------------------------------------ pose json


def _pose_joints(offset: float) -> list[list[float]]:
    return [[10.0 + 3 * j + offset, 40.0 - 2 * j + offset / 2] for j in range(16)]


POSE_IMAGES = [
    {"file": "img/p0.png", "split": "train", "width": 64, "height": 48,
     "joints": _pose_joints(0.0), "visible": [1] * 16},
    {"file": "img/p1.png", "split": "val", "width": 40, "height": 60,
     "joints": _pose_joints(5.5), "visible": [1] * 10 + [0] * 6},
    {"file": "img/p2.png", "split": "test", "width": 50, "height": 50,
     "joints": _pose_joints(-2.0), "visible": [0, 1] * 8, "box": [1.0, 2.0, 41.0, 42.0]},
]
"""What ``write_pose_json`` writes: two images without a box (default crop), one with."""


def write_pose_json(folder: str | Path, images: list[dict] | None = None, write_images: bool = True,
                    name: str = "poses.json") -> Path:
    """``folder/poses.json`` in our pose format (+ the images); returns the json path."""
    folder = Path(folder)
    images = POSE_IMAGES if images is None else images
    if write_images:
        for img in images:
            if "file" in img:
                write_image(folder / img["file"], (int(img.get("width", 8)), int(img.get("height", 8))))
    path = folder / name
    path.write_text(json.dumps({"joint_names": list(MPII_JOINTS), "images": images}))
    return path


# -------------------------------------------------------------------------------------- MPII .mat

# Persons as written into the .mat, MATLAB 1-based coordinates. points: (id, x, y, is_visible) where
# is_visible is written as given: a number, a one-char string, or None for [] (empty).
MPII_PEOPLE = {
    # image 1, a single person (annorect 1x1 -> bare struct); ankles (ids 0, 5) missing
    "A": {"image": "015601864.jpg", "objpos": (301.0, 251.0), "scale": 2.0, "head": (280, 100, 320, 150),
          "points": [(j, 200.0 + 10 * j, 400.0 - 15 * j, vis) for j, vis in zip(
              [1, 2, 3, 4, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15],
              ["1", "0", 1, 0, None, "1", 1, 1, "0", 0, 1, "1", None, 1])]},
    # image 2, first of two people: all 16 points, numeric is_visible
    "B": {"image": "015599452.jpg", "objpos": (121.0, 81.0), "scale": 1.5, "head": (100, 20, 140, 60),
          "points": [(j, 50.5 + j, 60.25 + 2 * j, j % 2) for j in range(16)]},
    # image 2, second person: annotated head box but annopoints = [] (skipped)
    "D": {"image": "015599452.jpg", "objpos": (221.0, 91.0), "scale": 1.0, "head": (200, 30, 240, 70),
          "points": None},
    # image 3, alone: one point only (point 1x1 -> bare struct) and no is_visible field at all
    "C": {"image": "091807521.jpg", "objpos": (401.0, 91.0), "scale": 0.8, "head": (380, 30, 420, 70),
          "points": [(9, 410.0, 35.0, "absent")]},
}
MPII_IMAGES = [  # (name, img_train, people written into annorect)
    ("015601864.jpg", 1, ["A"]),
    ("015599452.jpg", 1, ["B", "D"]),
    ("091807521.jpg", 1, ["C"]),
    ("005808361.jpg", 1, ["no_annopoints"]),   # a person with a head box but no annopoints field
    ("060111501.jpg", 0, ["test_person"]),     # test image: objpos/scale, never joints
]
MPII_EXPECTED_ORDER = ["A", "B", "C"]
"""The records read_mpii returns from ``write_mpii``'s file, in order."""


def _struct_array(rows: list[dict], fields: list[str]) -> np.ndarray:
    """A 1xN MATLAB struct array (savemat writes a structured object array as one)."""
    arr = np.empty((1, len(rows)), dtype=[(f, object) for f in fields])
    for i, row in enumerate(rows):
        for f in fields:
            arr[0, i][f] = row[f]
    return arr


def _empty() -> np.ndarray:
    return np.zeros((0, 0))


def _person(spec: dict) -> dict:
    x1, y1, x2, y2 = spec["head"]
    rect = {"x1": x1, "y1": y1, "x2": x2, "y2": y2, "scale": spec["scale"],
            "objpos": {"x": spec["objpos"][0], "y": spec["objpos"][1]}}
    if spec["points"] is None:
        return {**rect, "annopoints": _empty()}
    with_vis = all(p[3] != "absent" for p in spec["points"])
    rows = []
    for jid, x, y, vis in spec["points"]:
        row = {"x": x, "y": y, "id": jid}
        if with_vis:
            row["is_visible"] = _empty() if vis is None else vis
        rows.append(row)
    fields = ["x", "y", "id"] + (["is_visible"] if with_vis else [])
    return {**rect, "annopoints": {"point": _struct_array(rows, fields)}}


def write_mpii(folder: str | Path, write_images: bool = True) -> tuple[Path, Path]:
    """``folder/mpii_human_pose_v1_u12_1.mat`` shaped like the release; returns (mat, image_root)."""
    folder = Path(folder)
    image_root = folder / "images"
    annolist = []
    for name, _train, people in MPII_IMAGES:
        if people == ["no_annopoints"] or people == ["test_person"]:
            rect = _struct_array([{"x1": 10, "y1": 10, "x2": 30, "y2": 30, "scale": 1.1,
                                   "objpos": {"x": 20, "y": 60}}], ["x1", "y1", "x2", "y2", "scale", "objpos"])
        else:
            rect = _struct_array([_person(MPII_PEOPLE[p]) for p in people],
                                 ["x1", "y1", "x2", "y2", "scale", "objpos", "annopoints"])
        annolist.append({"image": {"name": name}, "annorect": rect, "frame_sec": _empty(), "vididx": _empty()})
        if write_images:
            write_image(image_root / name, (16, 12))
    single = np.empty((len(MPII_IMAGES), 1), dtype=object)
    single[:, 0] = [np.array([1.0]), np.array([[1.0]]), np.array([1.0]), _empty(), np.array([1.0])]
    act = _struct_array([{"act_name": "", "cat_name": "", "act_id": -1}] * len(MPII_IMAGES),
                        ["act_name", "cat_name", "act_id"]).T
    release = {
        "annolist": _struct_array(annolist, ["image", "annorect", "frame_sec", "vididx"]),
        "img_train": np.array([[t for _, t, _ in MPII_IMAGES]], dtype=float),
        "version": "12",
        "single_person": single,
        "act": act,
        "video_list": np.array([["aAOusnrSsHI"]], dtype=object),
    }
    path = folder / "mpii_human_pose_v1_u12_1.mat"
    folder.mkdir(parents=True, exist_ok=True)
    scipy.io.savemat(str(path), {"RELEASE": release})
    return path, image_root


# ------------------------------------------------------------------------------ MPII JSON (annot/)

MPII_JSON_FILES = {"train.json": ["A", "B"], "valid.json": ["C"]}
"""What ``write_mpii_json`` writes by default: the .mat fixture's annotated people, one entry each."""
MPII_JSON_SPLIT_FILE = {"015601864.jpg": "train", "015599452.jpg": "train", "091807521.jpg": "val"}
"""The same split for ``read_mpii(split_file=...)``: images of valid.json people are "val"."""


def mpii_json_entry(key: str) -> dict:
    """MPII_PEOPLE[key] as HRNet's annot/*.json holds it: the .mat's 1-based values unchanged,
    joints_vis 1 for an annotated joint, absent joints at [-1, -1] with joints_vis 0."""
    spec = MPII_PEOPLE[key]
    joints = [[-1.0, -1.0] for _ in range(len(MPII_JOINTS))]
    vis = [0] * len(MPII_JOINTS)
    for jid, x, y, _is_visible in spec["points"] or []:
        joints[jid] = [float(x), float(y)]
        vis[jid] = 1
    return {"joints_vis": vis, "joints": joints, "image": spec["image"], "scale": float(spec["scale"]),
            "center": [float(spec["objpos"][0]), float(spec["objpos"][1])]}


def write_mpii_json(folder: str | Path, files: dict[str, list] | None = None,
                    write_images: bool = True) -> tuple[Path, Path]:
    """``folder/annot/<name>.json`` in HRNet's MPII layout (+ ``folder/images/``); returns (annot, image_root).

    ``files`` maps a file name to its entries: MPII_PEOPLE keys or ready-made entry dicts (to write a
    broken one); default MPII_JSON_FILES.
    """
    folder = Path(folder)
    annot, image_root = folder / "annot", folder / "images"
    annot.mkdir(parents=True, exist_ok=True)
    for name, people in (MPII_JSON_FILES if files is None else files).items():
        entries = [mpii_json_entry(p) if isinstance(p, str) else p for p in people]
        (annot / name).write_text(json.dumps(entries))
        if write_images:
            for e in entries:
                if isinstance(e, dict) and isinstance(e.get("image"), str):
                    write_image(image_root / e["image"], (16, 12))
    return annot, image_root


# ------------------------------------------------------------------------------------- LSUN .mat

LSUN_ENTRIES = {
    "training": [
        {"image": "00a4b7b5a4e8bdea7fb8f7e8d7a0b0a7f5b3c1d2", "scene": "bedroom", "type": 5},
        {"image": "0b1e8e4cd2d1e9b0a3f6c2e6e7f9b5a4c3d2e1f0", "scene": "livingroom", "type": 0},
    ],
    "validation": [
        {"image": "1c2d3e4f5a6b7c8d9e0f1a2b3c4d5e6f7a8b9c0d", "scene": "office", "type": 5},
    ],
}
"""What ``write_lsun`` writes: per split file, the entries (in order)."""


LSUN_H, LSUN_W = 30, 40
SURFACE_IDS = {"front": 1, "left": 2, "right": 3, "floor": 4, "ceiling": 5}
# layout type -> (corners, 0-based (x, y) in a 40x30 image; surfaces as polygons drawn in this order).
# Drawn by hand from each type's picture (which corner is where), independently of
# capdata.readers.lsun_types: a test that converts these maps checks that module against them.
ROOMS = {
    0: ([(12, 9), (0, 2), (12, 21), (0, 28), (28, 21), (39, 28), (28, 9), (39, 2)],
        [("ceiling", [(0, 0), (39, 0), (39, 2), (28, 9), (12, 9), (0, 2)]),
         ("floor", [(0, 28), (12, 21), (28, 21), (39, 28), (39, 29), (0, 29)]),
         ("left", [(0, 2), (12, 9), (12, 21), (0, 28)]),
         ("right", [(39, 2), (39, 28), (28, 21), (28, 9)]),
         ("front", [(12, 9), (28, 9), (28, 21), (12, 21)])]),
    1: ([(13, 20), (13, 0), (0, 26), (27, 20), (27, 0), (39, 25)],
        [("left", [(0, 0), (13, 0), (13, 20), (0, 26)]),
         ("front", [(13, 0), (27, 0), (27, 20), (13, 20)]),
         ("right", [(27, 0), (39, 0), (39, 25), (27, 20)]),
         ("floor", [(0, 26), (13, 20), (27, 20), (39, 25), (39, 29), (0, 29)])]),
    5: ([(20, 8), (0, 3), (39, 4), (21, 22), (0, 27), (39, 26)],
        [("ceiling", [(0, 0), (39, 0), (39, 4), (20, 8), (0, 3)]),
         ("left", [(0, 3), (20, 8), (21, 22), (0, 27)]),
         ("right", [(39, 4), (39, 26), (21, 22), (20, 8)]),
         ("floor", [(0, 27), (21, 22), (39, 26), (39, 29), (0, 29)])]),
    6: ([(0, 7), (39, 8), (0, 22), (39, 21)],
        [("ceiling", [(0, 0), (39, 0), (39, 8), (0, 7)]),
         ("front", [(0, 7), (39, 8), (39, 21), (0, 22)]),
         ("floor", [(0, 22), (39, 21), (39, 29), (0, 29)])]),
    10: ([(18, 0), (21, 29)],
         [("left", [(0, 0), (18, 0), (21, 29), (0, 29)]),
          ("right", [(18, 0), (39, 0), (39, 29), (21, 29)])]),
}
"""Hand-drawn rooms of five layout types, for converting original-numbered maps."""


def lsun_map(layout_type: int) -> np.ndarray:
    """The room of ``ROOMS`` as a surface-relabelled map (ids 1 front, 2 left, 3 right, 4 floor, 5 ceiling)."""
    from PIL import ImageDraw

    img = Image.new("L", (LSUN_W, LSUN_H), 0)
    draw = ImageDraw.Draw(img)
    for surface, polygon in ROOMS[layout_type][1]:
        draw.polygon(polygon, fill=SURFACE_IDS[surface])
    out = np.asarray(img).copy()
    assert out.min() > 0, "every pixel lies on a surface"
    return out


def lsun_corners(layout_type: int) -> np.ndarray:
    """``point`` as the release stores it: 1-based (MATLAB) [K, 2] corners of ``ROOMS[layout_type]``."""
    return np.array(ROOMS[layout_type][0], dtype=np.float64) + 1.0


def region_numbering(surfaces: np.ndarray) -> np.ndarray:
    """The original release's numbering of a surface map: 8-connected regions 1..K, numbered in the
    order a column-major scan first meets them (MATLAB ``bwconncomp``)."""
    import scipy.ndimage

    comps = []
    for v in np.unique(surfaces):
        labelled, n = scipy.ndimage.label(surfaces == v, structure=np.ones((3, 3)))
        comps += [labelled == k for k in range(1, n + 1)]
    first = [int(np.flatnonzero(c.ravel(order="F"))[0]) for c in comps]
    out = np.zeros(surfaces.shape, dtype=np.uint8)
    for number, k in enumerate(np.argsort(first), 1):
        out[comps[k]] = number
    return out


def write_lsun(folder: str | Path, write_images: bool = True, types: dict | None = None,
               numbering: str = "surfaces") -> Path:
    """An LSUN room-layout folder (training.mat, validation.mat, images/, layout_seg/); returns it.

    ``types``: {split file stem: [layout types]} (default: ``LSUN_ENTRIES``); ``numbering``: the
    maps' ids, ``surfaces`` (the relabelled copy) or ``regions`` (the original release).
    """
    root = Path(folder)
    (root / "layout_seg").mkdir(parents=True, exist_ok=True)
    listing = ({stem: [dict(e) for e in entries] for stem, entries in LSUN_ENTRIES.items()} if types is None else
               {stem: [{"image": f"{stem}_{i:03d}_type{t}", "scene": "bedroom", "type": t} for i, t in enumerate(ts)]
                for stem, ts in types.items()})
    for stem, entries in listing.items():
        rows = []
        for e in entries:
            seg = lsun_map(e["type"])
            if numbering == "regions":
                seg = region_numbering(seg)
            h, w = seg.shape
            rows.append({"image": e["image"], "scene": e["scene"], "type": float(e["type"]),
                         "point": lsun_corners(e["type"]), "resolution": np.array([[h, w]], dtype=float)})
            scipy.io.savemat(str(root / "layout_seg" / f"{e['image']}.mat"), {"layout": seg})
            if write_images:
                write_image(root / "images" / f"{e['image']}.jpg", (w, h))
        scipy.io.savemat(str(root / f"{stem}.mat"),
                         {stem: _struct_array(rows, ["image", "scene", "type", "point", "resolution"])})
    return root


def write_layout_png(path: str | Path, ids: np.ndarray) -> Path:
    """A layout map PNG in our ids (uint8 grey), as docs/design.md describes them."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.fromarray(np.asarray(ids, dtype=np.uint8)).save(path)
    return path
