"""Reader for the LSUN room-layout release (LSUN 2015/2016 Room Layout Challenge).

Files under ``root``:

* ``training.mat`` / ``validation.mat`` (``testing.mat`` has no labels): a 1xN struct array in a
  variable named like the file, fields ``image`` (name without extension), ``scene``, ``type``
  (layout type 0..10), ``point`` (Kx2 corner keypoints, x y) and ``resolution`` ([H W]).
* ``images/<image>.jpg`` and ``layout_seg/<image>.mat`` (variable ``layout``, uint8 [H, W]).

Segmentation ids. The surface-labelled maps (``LSUN2016_surface_relabel``, the set recommended by
leVirve/lsun-room and read by its ``Layout`` enum and by the LSUN->wireframe converters) use
1 frontal wall, 2 left wall, 3 right wall, 4 floor, 5 ceiling; ``LSUN_TO_OURS`` maps these to
``embedder.records.LAYOUT_SURFACES`` (0 ceiling, 1 floor, 2 left, 3 front, 4 right). Caution: the
maps of the original 2015 toolkit (``getSegmentation.m``) number regions by connected component,
not by surface, and LSUN's pixel error matches them to a prediction with the Hungarian algorithm;
those ids are not surfaces. Use the surface-relabelled maps, or convert to our PNG (0..4) first.
Split: training -> "train", validation -> "test" (LSUN's test labels were never released).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from embedder.errors import CapawareError
from embedder.readers.mpii import as_list, load_mat_file, scalar
from embedder.records import LAYOUT_SURFACES, LayoutRecords

LSUN_SURFACES = {1: "front", 2: "left", 3: "right", 4: "floor", 5: "ceiling"}
"""LSUN surface-relabelled segmentation ids (source: leVirve/lsun-room ``lsun_room/label.py``
``Layout`` enum: frontal=1, left=2, right=3, floor=4, ceiling=5)."""

LSUN_TO_OURS = {lsun: LAYOUT_SURFACES.index(name) for lsun, name in LSUN_SURFACES.items()}
"""{1: 3, 2: 2, 3: 4, 4: 1, 5: 0}."""

SPLIT_FILES = (("training", "train"), ("validation", "test"))
_LUT = np.full(256, 255, dtype=np.uint8)
for _lsun, _ours in LSUN_TO_OURS.items():
    _LUT[_lsun] = _ours


def read_lsun(root: str | Path, layout_type: int | None = None) -> LayoutRecords:
    """Images of ``training.mat`` and ``validation.mat`` (whichever exist), optionally one layout type.

    The paper uses layout type 5 only (``layout_type=5``).
    """
    root = Path(root).resolve()
    if not root.is_dir():
        raise CapawareError(root, "LSUN room-layout folder not found", "pass the folder holding training.mat")
    present = [(stem, split) for stem, split in SPLIT_FILES if (root / f"{stem}.mat").is_file()]
    if not present:
        raise CapawareError(root, "neither training.mat nor validation.mat is there",
                            "download them from the LSUN room-layout release into this folder")

    paths, splits, segs, types = [], [], [], []
    for stem, split in present:
        mat_path = root / f"{stem}.mat"
        mat = load_mat_file(mat_path, "LSUN split file")
        if stem not in mat:
            found = ", ".join(k for k in mat if not k.startswith("__")) or "none"
            raise CapawareError(mat_path, f"no variable '{stem}' (variables: {found})",
                                "this is not an LSUN room-layout split file")
        for i, entry in enumerate(as_list(mat[stem])):
            name = getattr(entry, "image", None)
            kind = scalar(getattr(entry, "type", None))
            if not isinstance(name, str) or not name:
                raise CapawareError(mat_path, f"entry {i + 1} has no 'image' name",
                                    "this is not an LSUN room-layout split file")
            if kind is None or kind != int(kind):
                raise CapawareError(mat_path, f"entry {i + 1} ({name}) has no integer 'type'",
                                    "this is not an LSUN room-layout split file")
            if layout_type is not None and int(kind) != layout_type:
                continue
            paths.append(root / "images" / f"{name}.jpg")
            segs.append(root / "layout_seg" / f"{name}.mat")
            splits.append(split)
            types.append(int(kind))

    if not paths:
        what = f" of layout type {layout_type}" if layout_type is not None else ""
        raise CapawareError(root, f"no images{what}", "check layout_type (0..10)")
    return LayoutRecords(image_paths=paths, splits=np.array(splits), seg_paths=segs,
                         layout_types=np.array(types, dtype=np.int64))


def load_layout_map(path: str | Path) -> np.ndarray:
    """A layout map as uint8 [H, W] in our ids 0..4.

    ``.mat``: LSUN surface ids 1..5 in variable ``layout``, mapped with ``LSUN_TO_OURS``.
    ``.png``: already our ids (DESIGN §3), checked only.
    """
    path = Path(path)
    suffix = path.suffix.lower()
    if suffix == ".mat":
        mat = load_mat_file(path, "layout segmentation")
        if "layout" not in mat:
            found = ", ".join(k for k in mat if not k.startswith("__")) or "none"
            raise CapawareError(path, f"no variable 'layout' (variables: {found})",
                                "pass an LSUN layout_seg .mat file")
        raw = np.asarray(mat["layout"])
        if raw.ndim != 2 or raw.size == 0 or not np.issubdtype(raw.dtype, np.number):
            raise CapawareError(path, f"'layout' is not a 2-D label map (shape {raw.shape}, {raw.dtype})",
                                "pass an LSUN layout_seg .mat file")
        values = np.unique(raw)
        unknown = [v for v in values.tolist() if v not in LSUN_TO_OURS]
        if unknown:
            raise CapawareError(path, f"unknown LSUN layout label {unknown[0]:g} (expected 1..5: "
                                "front, left, right, floor, ceiling)",
                                "use the surface-relabelled maps; original region-numbered maps are not surfaces")
        return _LUT[raw.astype(np.int64)]
    if suffix == ".png":
        if not path.is_file():
            raise CapawareError(path, "layout map not found", "check seg path or regenerate the map")
        try:
            with Image.open(path) as img:
                img.load()
                if img.mode not in ("L", "P", "I", "I;16"):
                    raise CapawareError(path, f"layout PNG has mode {img.mode}, expected one channel of ids",
                                        "write the map as a uint8 grey PNG of ids 0..4")
                arr = np.asarray(img)
        except CapawareError:
            raise
        except Exception as err:
            if isinstance(err, UnidentifiedImageError):
                reason = "not a known image format, or corrupt"
            else:
                reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise CapawareError(path, f"cannot decode layout PNG ({reason})",
                                "regenerate the map or remove the entry") from None
        bad = arr[(arr < 0) | (arr > len(LAYOUT_SURFACES) - 1)]
        if bad.size:
            raise CapawareError(path, f"unknown layout label {int(bad.flat[0])} (expected 0..4: "
                                + ", ".join(LAYOUT_SURFACES) + ")", "regenerate the map with our ids")
        return arr.astype(np.uint8)
    raise CapawareError(path, f"unsupported layout map type '{suffix}'", "use an LSUN .mat or a 0..4 PNG")


__all__ = ["read_lsun", "load_layout_map", "LSUN_SURFACES", "LSUN_TO_OURS"]
