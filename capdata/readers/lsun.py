"""Reader for the LSUN room-layout release (LSUN 2015/2016 Room Layout Challenge).

Files under ``root`` (the real formats, with examples: docs/data_formats/layout.md):

* ``training.mat`` / ``validation.mat`` (``testing.mat`` has no labels): a 1xN struct array in a
  variable named like the file, fields ``image`` (name without extension), ``scene``, ``type``
  (layout type 0..10), ``point`` (Kx2 corners, x y, MATLAB 1-based, fractional, possibly outside the
  image; K is fixed by the type) and ``resolution`` ([H W]).
* ``images/<image>.jpg`` and ``layout_seg/<image>.mat`` (variable ``layout``, [H, W] ids).

Two numberings of ``layout`` exist, chosen by ``data.layout_labels``:

* ``surfaces``: the surface-relabelled copy (``LSUN2016_surface_relabel``, recommended by
  leVirve/lsun-room): 1 frontal wall, 2 left wall, 3 right wall, 4 floor, 5 ceiling, mapped by
  ``LSUN_TO_OURS`` to ``capdata.records.LAYOUT_SURFACES`` (0 ceiling, 1 floor, 2 left, 3 front, 4 right);
* ``regions``: the original release: regions 1..K in ``bwconncomp`` order, named from the room type
  and corners by ``capdata.readers.lsun_types.name_regions``;
* ``auto`` (default): per map, the corners name the regions; a map whose ids already are those
  surfaces reads as the relabelled copy, one numbered like ``bwconncomp`` is converted, any other is
  refused. Both readings give the same surfaces wherever both fit, so nothing is guessed.

Every corner count is checked against the type when the split file is read; a map whose size differs
from ``resolution`` is refused when it is read (the data stage reads every map and also checks it
against its image: ``capdata.check_data``). Split: training -> "train", validation -> "test" (LSUN's
test labels were never released).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, UnidentifiedImageError

from capcore.errors import CapawareError
from capdata.readers.lsun_types import (
    LAYOUT_TYPES,
    SURFACE_IDS,
    corner_count,
    is_region_numbering,
    name_regions,
)
from capdata.readers.mpii import as_list, load_mat_file, scalar
from capdata.records import LAYOUT_SURFACES, LayoutRecords

LSUN_SURFACES = {1: "front", 2: "left", 3: "right", 4: "floor", 5: "ceiling"}
"""LSUN surface-relabelled segmentation ids (source: leVirve/lsun-room ``lsun_room/label.py``
``Layout`` enum: frontal=1, left=2, right=3, floor=4, ceiling=5)."""

LSUN_TO_OURS = {lsun: LAYOUT_SURFACES.index(name) for lsun, name in LSUN_SURFACES.items()}
"""{1: 3, 2: 2, 3: 4, 4: 1, 5: 0}."""

SPLIT_FILES = (("training", "train"), ("validation", "test"))
_LUT = np.full(256, 255, dtype=np.uint8)
for _lsun, _ours in LSUN_TO_OURS.items():
    _LUT[_lsun] = _ours


MAP_LABELS = ("auto", "surfaces", "regions")
"""``data.layout_labels``: how ``layout_seg`` ids are read (module doc)."""
_NOT_LSUN = "this is not an LSUN room-layout split file"


def _corners(entry, layout_type: int, where: str, mat_path: Path) -> np.ndarray:
    """The entry's ``point`` as [K, 2] 0-based (x, y), K checked against the layout type."""
    raw = getattr(entry, "point", None)
    try:
        pts = np.asarray(raw, dtype=np.float64)
    except (TypeError, ValueError):
        pts = np.zeros((0,))
    if raw is None or pts.ndim != 2 or pts.shape[1] != 2 or not np.isfinite(pts).all():
        shape = "missing" if raw is None else f"shape {pts.shape}"
        raise CapawareError(mat_path, f"{where}: 'point' is not a Kx2 array of corners ({shape})", _NOT_LSUN)
    expected = corner_count(layout_type)
    if len(pts) != expected:
        raise CapawareError(mat_path, f"{where}: layout type {layout_type} has {expected} corners, 'point' holds "
                            f"{len(pts)}", "fix the entry's type or corners, or remove the entry")
    return pts - 1.0  # MATLAB 1-based -> 0-based pixel centres


def _resolution(entry, where: str, mat_path: Path) -> tuple[int, int]:
    raw = np.asarray(getattr(entry, "resolution", []), dtype=object).ravel()
    try:
        h, w = (float(v) for v in raw)
    except (TypeError, ValueError):
        raise CapawareError(mat_path, f"{where}: 'resolution' is not [height width] ({raw.tolist()})",
                            _NOT_LSUN) from None
    if h != int(h) or w != int(w) or h < 1 or w < 1:
        raise CapawareError(mat_path, f"{where}: 'resolution' [{h:g} {w:g}] is not a positive image size",
                            _NOT_LSUN)
    return int(h), int(w)


def read_lsun(root: str | Path, layout_type: int | None = None, labels: str = "auto") -> LayoutRecords:
    """Images of ``training.mat`` and ``validation.mat`` (whichever exist), optionally one layout type.

    The paper uses layout type 5 only (``layout_type=5``). ``labels``: how the maps are numbered
    (``MAP_LABELS``; module doc). Entries are checked (corner count, resolution) whether kept or not.
    """
    if labels not in MAP_LABELS:
        raise CapawareError("data.layout_labels", f"unknown value {labels!r}", f"use one of {', '.join(MAP_LABELS)}")
    root = Path(root).resolve()
    if not root.is_dir():
        raise CapawareError(root, "LSUN room-layout folder not found", "pass the folder holding training.mat")
    present = [(stem, split) for stem, split in SPLIT_FILES if (root / f"{stem}.mat").is_file()]
    if not present:
        raise CapawareError(root, "neither training.mat nor validation.mat is there",
                            "download them from the LSUN room-layout release into this folder")

    paths, splits, segs, types, corners, sizes = [], [], [], [], [], []
    for stem, split in present:
        mat_path = root / f"{stem}.mat"
        mat = load_mat_file(mat_path, "LSUN split file")
        if stem not in mat:
            found = ", ".join(k for k in mat if not k.startswith("__")) or "none"
            raise CapawareError(mat_path, f"no variable '{stem}' (variables: {found})", _NOT_LSUN)
        for i, entry in enumerate(as_list(mat[stem])):
            name = getattr(entry, "image", None)
            kind = scalar(getattr(entry, "type", None))
            if not isinstance(name, str) or not name:
                raise CapawareError(mat_path, f"entry {i + 1} has no 'image' name", _NOT_LSUN)
            where = f"entry {i + 1} ({name})"
            if kind is None or kind != int(kind) or int(kind) not in LAYOUT_TYPES:
                raise CapawareError(mat_path, f"{where} has no layout 'type' in 0..10", _NOT_LSUN)
            pts = _corners(entry, int(kind), where, mat_path)
            size = _resolution(entry, where, mat_path)
            if layout_type is not None and int(kind) != layout_type:
                continue
            paths.append(root / "images" / f"{name}.jpg")
            segs.append(root / "layout_seg" / f"{name}.mat")
            splits.append(split)
            types.append(int(kind))
            corners.append(pts)
            sizes.append(size)

    if not paths:
        what = f" of layout type {layout_type}" if layout_type is not None else ""
        raise CapawareError(root, f"no images{what}", "check layout_type (0..10)")
    return LayoutRecords(image_paths=paths, splits=np.array(splits), seg_paths=segs,
                         layout_types=np.array(types, dtype=np.int64), corners=corners,
                         resolutions=np.array(sizes, dtype=np.int64).reshape(-1, 2), map_labels=labels)


def record_layout_map(records: LayoutRecords, i: int) -> np.ndarray:
    """Record ``i``'s layout map in our ids, read as its records say (numbering, type, corners, size)."""
    has = records.corners is not None
    return load_layout_map(records.seg_paths[i], labels=records.map_labels,
                           layout_type=int(records.layout_types[i]) if has else None,
                           corners=records.corners[i] if has else None,
                           resolution=tuple(records.resolutions[i]) if records.resolutions is not None else None,
                           image=Path(records.image_paths[i]).name)


def _of(image: str | None) -> str:
    return f"image {image}: " if image else ""


def _our_ids(path: Path, raw: np.ndarray, labels: str, layout_type, corners, image) -> np.ndarray:
    """Map ``raw`` (LSUN ids of either numbering) to our ids (module doc: ``data.layout_labels``)."""
    if not np.issubdtype(raw.dtype, np.integer):
        if not np.all(raw == np.round(raw)):
            raise CapawareError(path, f"{_of(image)}'layout' holds non-integer ids", "pass an LSUN layout_seg map")
    raw = raw.astype(np.int64)
    values = np.unique(raw).tolist()
    if labels == "surfaces" or (labels == "auto" and corners is None):
        unknown = [v for v in values if v not in LSUN_TO_OURS]
        if unknown:
            raise CapawareError(path, f"{_of(image)}unknown surface label {unknown[0]} (expected 1..5: front, left, "
                                "right, floor, ceiling)", "for the original release's region-numbered maps set "
                                "data.layout_labels=regions (or auto)")
        return _LUT[raw]
    if corners is None or layout_type is None:
        raise CapawareError(path, f"{_of(image)}region-numbered maps need the room type and corners",
                            "read the set with read_lsun, which gives both")
    if values[0] < 1:
        raise CapawareError(path, f"{_of(image)}unknown layout label {values[0]} (regions are numbered from 1)",
                            "pass an LSUN layout_seg map")
    try:
        named = name_regions(raw, layout_type, corners)
    except ValueError as err:
        named, failure = None, str(err)
    if labels == "auto":
        as_surfaces = named is not None and all(SURFACE_IDS[s] == v for v, s in named.items())
        if as_surfaces or (named is None and not is_region_numbering(raw) and set(values) <= set(LSUN_TO_OURS)):
            return _LUT[raw]  # the relabelled copy (the corners agree, or cannot tell and ids are not regions)
        if named is not None and not is_region_numbering(raw):
            surfaces = ", ".join(f"{v}->{s}" for v, s in named.items())
            raise CapawareError(path, f"{_of(image)}ids {values} are neither the surfaces the corners of type "
                                f"{layout_type} name ({surfaces}) nor region numbers in bwconncomp order",
                                "set data.layout_labels to surfaces or regions if you know the numbering, "
                                "or fix the entry's type and corners")
    if named is None:
        raise CapawareError(path, f"{_of(image)}cannot name the regions: {failure}",
                            "fix the entry's type and corners, or remove the entry")
    lut = np.full(max(values) + 1, 255, dtype=np.uint8)
    for v, s in named.items():
        lut[v] = LAYOUT_SURFACES.index(s)
    return lut[raw]


def load_layout_map(path: str | Path, labels: str = "surfaces", layout_type: int | None = None,
                    corners: np.ndarray | None = None, resolution: tuple[int, int] | None = None,
                    image: str | None = None) -> np.ndarray:
    """A layout map as uint8 [H, W] in our ids 0..4.

    ``.mat``: variable ``layout``, numbered as ``labels`` says (module doc); ``regions`` and ``auto``
    use ``layout_type`` and ``corners`` (0-based [K, 2]); with ``resolution`` ([H, W]) the size is
    checked. ``image`` names the record in errors. ``.png``: already our ids, checked only.
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
        if resolution is not None and tuple(raw.shape) != tuple(resolution):
            raise CapawareError(path, f"{_of(image)}layout map is {raw.shape[0]}x{raw.shape[1]} (HxW), the split "
                                f"file's resolution {resolution[0]}x{resolution[1]}",
                                "use the layout_seg map of this very image, or fix the entry's resolution")
        return _our_ids(path, raw, labels, layout_type, corners, image)
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


__all__ = ["read_lsun", "load_layout_map", "record_layout_map", "LSUN_SURFACES", "LSUN_TO_OURS", "MAP_LABELS"]
