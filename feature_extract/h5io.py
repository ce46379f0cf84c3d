"""The features file ``feats.h5`` (docs/design.md): creation, resume checks, and reading it in stage three.

Layout::

    att        [N, att_size*att_size, C]  float16|float32, one image per chunk (row-major H, W; C last)
    fc         [N, C]                     same dtype, one image per chunk (mean of layer4)
    image_id   [N] int64                  written at creation
    image_file [N] str                    path relative to the image root (to trace a row back)
    skipped    [N] bool                   images that failed to decode under skip_bad (rows are zeros)

Attributes are listed in ``IDENTITY`` (what the numbers depend on; a resume must match all of them)
plus ``command``, ``n_done`` (rows [0, n_done) are final; updated after each flushed batch),
``n_skipped`` and ``complete`` (written last). Uncompressed datasets are allocated in full at
creation, so writing a batch never touches the chunk index: a kill can only leave stale rows past
``n_done``, which a resume overwrites.

A dump is created as ``<out>.partial`` (``partial_path``) and renamed to ``<out>`` once its first
batch is committed (``n_done`` > 0): the final path never holds an empty dump. An interrupted dump is
a *partial* one (``complete`` false): at ``<out>`` when it committed a batch (a rerun resumes it
there), as ``<out>.partial`` when it did not (a rerun starts it over).
"""
from __future__ import annotations

import json
import math
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from capcore.atomic import atomic_path
from capcore.errors import CapawareError
from feature_extract.row_labels import label_of

FORMAT = "capaware-features/1"
DATASETS = ("att", "fc", "image_id")
IDENTITY = ("format", "backbone", "backbone_method", "arch", "checkpoint_sha256", "input_policy",
            "input_size", "att_size", "channels", "dtype", "compression", "precision", "images_sha256",
            "n_images")
FORCE_FIX = "delete the file or rerun with --force to start it over"
PARTIAL_SUFFIX = ".partial"


def partial_path(out: str | Path) -> Path:
    """Where a dump lives until its first batch is committed: ``feats.h5`` -> ``feats.h5.partial``."""
    out = Path(out)
    return out.with_name(out.name + PARTIAL_SUFFIX)


def partial_note(f: h5py.File) -> str:
    """"partial dump: 40 of 123287 images done" (an interrupted dump, read from its attributes)."""
    attrs = read_attrs(f)
    return f"partial dump: {attrs.get('n_done', 0)} of {attrs.get('n_images', '?')} images done"


def missing_note(path: str | Path) -> str:
    """Why ``path`` is not there: "not found", plus what its partial sibling holds if there is one."""
    partial = partial_path(path)
    if not partial.is_file():
        return "not found"
    try:
        with h5py.File(partial, "r") as f:
            note = partial_note(f)
    except Exception:  # a partial file is never trusted; its name is what matters
        note = "partial dump"
    return f"not found; only {partial.name} is there ({note}, stopped before its first batch was committed)"


def _plain(value):
    return value.item() if isinstance(value, np.generic) else (value.decode() if isinstance(value, bytes) else value)


def read_attrs(f: h5py.File) -> dict:
    return {k: _plain(v) for k, v in f.attrs.items()}


def _dcpl(early: bool) -> h5py.h5p.PropDCID | None:
    """Allocate every chunk at creation and never write fill values (they would be overwritten)."""
    if not early:
        return None
    dcpl = h5py.h5p.create(h5py.h5p.DATASET_CREATE)
    dcpl.set_alloc_time(h5py.h5d.ALLOC_TIME_EARLY)
    dcpl.set_fill_time(h5py.h5d.FILL_TIME_NEVER)
    return dcpl


def create(path: str | Path, attrs: dict, image_ids: np.ndarray, image_files: list[str]) -> None:
    """Write the empty file (datasets, ids, attrs, n_done = 0) atomically: it exists whole or not at all."""
    n, hw, c = attrs["n_images"], attrs["att_size"] ** 2, attrs["channels"]
    comp = None if attrs["compression"] == "none" else attrs["compression"]
    opts = 4 if comp == "gzip" else None
    with atomic_path(path) as tmp:
        with h5py.File(tmp, "w") as f:
            for name, shape in (("att", (n, hw, c)), ("fc", (n, c))):
                f.create_dataset(name, shape=shape, dtype=attrs["dtype"], chunks=(1, *shape[1:]),
                                 compression=comp, compression_opts=opts, dcpl=_dcpl(comp is None))
            f.create_dataset("image_id", data=np.asarray(image_ids, dtype=np.int64))
            f.create_dataset("image_file", data=image_files, dtype=h5py.string_dtype())
            f.create_dataset("skipped", shape=(n,), dtype=bool, fillvalue=False)
            for key, value in attrs.items():
                f.attrs[key] = value
            f.attrs["n_done"] = 0
            f.attrs["n_skipped"] = 0
            f.attrs["complete"] = False


def open_for_resume(path: str | Path, attrs: dict) -> h5py.File | None:
    """The existing file opened for appending if it continues this very dump; None if complete.

    Any difference in an ``IDENTITY`` attribute (another backbone, checkpoint, grid, dtype, image
    list...) is a CapawareError naming it: mixing two dumps in one file would be silent corruption.
    """
    try:
        f = h5py.File(path, "r+")
    except OSError as err:
        raise CapawareError(path, f"existing file is not a readable HDF5 file ({_first(err)})", FORCE_FIX) from None
    try:
        have = read_attrs(f)
        if have.get("format") != FORMAT:
            raise CapawareError(path, "existing file is not a capaware features file", FORCE_FIX)
        for key in IDENTITY:
            if have.get(key) != attrs[key]:
                what = {"backbone": "another backbone", "checkpoint_sha256": "another checkpoint",
                        "arch": "another architecture", "images_sha256": "another image list",
                        "n_images": "another image list"}.get(key, "another config")
                raise CapawareError(path, f"existing file was dumped from {what} ({key}: file has "
                                    f"{have.get(key)!r}, this run {attrs[key]!r})", FORCE_FIX)
        if have.get("complete"):
            f.close()
            return None
        return f
    except BaseException:
        if f.id.valid:
            f.close()
        raise


def _first(err: BaseException) -> str:
    return str(err).splitlines()[0] if str(err) else type(err).__name__


class FeaturesFile:
    """A complete features file opened read-only; ``att[i]``/``fc[i]`` are read lazily per row."""

    def __init__(self, path: Path, f: h5py.File):
        self.path, self.h5, self.attrs = path, f, read_attrs(f)
        self.att, self.fc = f["att"], f["fc"]
        self.image_id = f["image_id"][()]
        self.skipped = f["skipped"][()] if "skipped" in f else np.zeros(len(self.image_id), bool)
        self.row = {int(i): r for r, i in enumerate(self.image_id)}  # image id -> row

    @property
    def label(self) -> str:
        return label_of(str(self.attrs.get("backbone", "")), str(self.attrs.get("label", "")))

    def __len__(self) -> int:
        return len(self.image_id)

    def close(self) -> None:
        self.h5.close()

    def __enter__(self) -> "FeaturesFile":
        return self

    def __exit__(self, *exc) -> None:
        self.close()


def open_features(path: str | Path) -> FeaturesFile:
    """Open a features file for reading; refuse a missing, truncated, incomplete or malformed one."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, f"features file {missing_note(path)}",
                            "dump it (or rerun the interrupted dump): python -m feature_extract --config ...")
    try:
        f = h5py.File(path, "r")
    except OSError as err:
        raise CapawareError(path, f"not a readable HDF5 file, truncated or damaged ({_first(err)})",
                            "delete it and dump it again (python -m feature_extract --config ... --force)") from None
    try:
        problems = check_structure(f)
        if problems:
            raise CapawareError(path, problems[0], "rerun python -m feature_extract with its config; "
                                "an interrupted dump resumes, a damaged one needs --force")
        return FeaturesFile(path, f)
    except BaseException:
        f.close()
        raise


def check_structure(f: h5py.File) -> list[str]:
    """Problems that make a file unusable (cheap: attrs and shapes only, no data scan)."""
    attrs = read_attrs(f)
    if attrs.get("format") != FORMAT:
        return ["not a capaware features file (no format attribute)"]
    missing = [name for name in DATASETS if not isinstance(f.get(name), h5py.Dataset)]
    if missing:
        return [f"missing dataset(s) {', '.join(missing)}"]
    absent = [name for name in IDENTITY if name not in attrs]
    if absent:  # written by something else, or edited: nothing below can be trusted
        return [f"missing attribute(s) {', '.join(absent)} (every capaware dump writes them at creation)"]
    not_int = [name for name in ("n_images", "channels", "att_size")
               if isinstance(attrs[name], bool) or not isinstance(attrs[name], (int, np.integer))]
    if not_int:
        return [f"attribute {name}={attrs[name]!r} is not an integer" for name in not_int]
    problems = []
    n, c, hw = attrs.get("n_images"), attrs.get("channels"), attrs.get("att_size", 0) ** 2
    expect = {"att": (n, hw, c), "fc": (n, c), "image_id": (n,)}
    for name, shape in expect.items():
        if f[name].shape != shape:
            problems.append(f"{name} has shape {list(f[name].shape)}, expected {list(shape)}")
    for name in ("att", "fc"):
        if f[name].dtype != np.dtype(attrs.get("dtype", "?")):
            problems.append(f"{name} is {f[name].dtype}, the dtype attribute says {attrs.get('dtype')}")
    if not attrs.get("complete"):
        problems.append(f"incomplete, a {partial_note(f)} (complete flag not set; "
                        "rerun the same dump command to finish it)")
    elif attrs.get("n_done") != n:
        problems.append(f"complete flag set but only {attrs.get('n_done')} of {n} rows written")
    return problems


def feature_label(path: str | Path) -> str:
    """"Img" (imagenet / class-pretrained), "Cap" (a stage-one metric-learning checkpoint) or
    "Custom", read from the file itself, so a results table cannot mislabel a swapped file."""
    with open_features(path) as feats:
        return feats.label


def splits_attr(splits) -> str:
    return json.dumps(list(splits))


EXTRACT_FIX = "rerun python -m feature_extract for this image set (it resumes a half-written file)"


@dataclass
class FeatsInfo:
    path: Path
    image_ids: np.ndarray  # [N] int64
    att_shape: tuple[int, int]  # (H*W, C)
    fc_dim: int
    grid: tuple[int, int]  # (H, W) of the attention grid
    valid: np.ndarray  # [N] bool: False for images the extractor skipped


def _grid(attrs, n_regions: int) -> tuple[int, int]:
    """The att grid: from the file's attributes when given, else the square root of H*W."""
    for key in ("att_grid", "grid", "att_size"):
        if key in attrs:
            g = np.atleast_1d(np.asarray(attrs[key])).astype(int)
            g = (int(g[0]), int(g[-1]))
            if g[0] * g[1] == n_regions:
                return g
    side = int(round(math.sqrt(n_regions)))
    return (side, side) if side * side == n_regions else (1, n_regions)


def read_feats_info(path: str | Path) -> FeatsInfo:
    """Stage three's check of a feats.h5: complete and well-formed (never a half-written one). It needs
    only the datasets above and ``complete``, not the identity attributes, so a file converted from
    another toolkit's features (e.g. bottom-up attention) reads too; the grid comes from ``att_grid``,
    ``grid`` or ``att_size`` when given."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "features file not found",
                            "run python -m feature_extract first, or set data.features / --features")
    try:
        with h5py.File(path, "r") as f:
            if not bool(f.attrs.get("complete", False)):
                raise CapawareError(path, "features file is incomplete (attribute complete is not True)", EXTRACT_FIX)
            for key in ("att", "fc", "image_id"):
                if key not in f:
                    raise CapawareError(path, f"no dataset {key!r} (need att [N, H*W, C], fc [N, C], image_id [N])",
                                        EXTRACT_FIX)
            att, fc, ids = f["att"], f["fc"], f["image_id"][:].astype(np.int64)
            n = len(ids)
            if att.ndim != 3 or fc.ndim != 2 or att.shape[0] != n or fc.shape[0] != n:
                raise CapawareError(path, f"inconsistent shapes att {att.shape}, fc {fc.shape}, image_id ({n},)",
                                    EXTRACT_FIX)
            valid = ~f["skipped"][:].astype(bool) if "skipped" in f else np.ones(n, bool)
            info = FeatsInfo(path, ids, (att.shape[1], att.shape[2]), fc.shape[1], _grid(f.attrs, att.shape[1]),
                             valid)
    except OSError as err:
        raise CapawareError(path, f"not a readable HDF5 file ({err})", EXTRACT_FIX) from None
    if len(np.unique(ids)) != len(ids):
        raise CapawareError(path, "image_id has duplicates", EXTRACT_FIX)
    return info
