"""Every dataset format capaware reads, one row each: format -> (track, default annotation, reader, splits).

Every stage reads records through this table, never through a reader directly: stage one and its
pretraining (``read_records`` on a config's ``data`` section), the features, the captioners, the probes
and the reports (``capdata.captions``, the caption view, on a file a config names). So a new dataset is a reader file
plus one ``register_format`` line, and every stage reads it.

A row holds:

- ``track``: the label space its records carry (pose | layout | caption);
- ``annotation``: the annotation file (or folder) under ``data.root`` when ``data.annotation`` is empty;
- ``read``: ``Source -> records``, one of ``capdata.records``' dataclasses;
- ``train_splits``: the record splits that train (Karpathy's restval joins train, as is standard); the
  evaluation splits are named by the configs (``eval.query_split``, ``eval.db_split``);
- ``synthetic``: the embedded-default generator that writes this format, when there is one;
- ``splits``: the split names its records use (none: a file without splits, read whole);
- ``sniff``: whether a parsed JSON file is one of this format, so that a file named without its format (a
  scorer's ``--refs``) is read by the right row (``capdata.captions.detect_format``).

Caption records carry the name of the row that read them (``CaptionRecords.format``), so a stage that holds
records asks them, not its config, which splits they have and which of them train.

Readers are imported when a row reads, not here: configs check ``data.format`` against this table when
they load, and loading a config stays cheap.
"""
from __future__ import annotations

import os
import shutil
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from capcore import plugins, registry
from capcore.errors import CapawareError
from capdata.splits import KARPATHY_SPLITS

TRACKS = ("pose", "layout", "caption")


@dataclass(frozen=True)
class Source:
    """Where a dataset lies, resolved from a ``data`` section (paths absolute or relative to the cwd)."""
    root: Path  # the dataset folder
    annotation: Path  # the annotation file or folder (the row's default under root when none is named)
    image_root: Path | None  # images, when they are not where the annotation says (MPII, COCO)
    split_file: Path | None  # MPII .mat: image -> train | val | test
    options: Any  # the data section itself, for format options (LSUN's layout_type and layout_labels)


@dataclass(frozen=True)
class Format:
    track: str
    annotation: str
    read: Callable[[Source], Any]
    train_splits: tuple[str, ...] = ("train",)
    synthetic: str | None = None  # "module:function" of the embedded-default generator
    title: str = ""  # how tables name the dataset's splits ("Karpathy test split"); empty: the format's name
    splits: tuple[str, ...] = ("train", "val", "test")  # the split names its records use; () none: read whole
    sniff: Callable[[Any], bool] | None = None  # is this parsed JSON a file of the format (caption formats)


FORMATS: dict[str, Format] = {}


def register_format(name: str, fmt: Format) -> Format:
    """Add a dataset format to the table (a second registration of one name must say the same)."""
    if fmt.track not in TRACKS:
        raise ValueError(f"format {name!r}: track {fmt.track!r} is not one of {TRACKS}")
    return registry.add(FORMATS, name, fmt, "format")


def formats_of(track: str) -> tuple[str, ...]:
    return tuple(name for name, fmt in FORMATS.items() if fmt.track == track)


def format_of(data) -> Format:
    """The row of ``data.format``, which must fit ``data.track``: one line naming both otherwise."""
    fmt = FORMATS.get(data.format) if plugins.knows(FORMATS, data.format) else None
    if fmt is None or fmt.track != data.track:
        raise CapawareError("data.format", f"format {data.format!r} does not fit track {data.track!r}",
                            f"use one of {formats_of(data.track) or TRACKS}")
    return fmt


def ensure_synthetic(data) -> None:
    """Generate the embedded default into ``data.root`` when it is missing and ``data.synthetic`` is set.

    It is written into a ``.partial`` sibling and renamed when complete, so a run killed mid-way never
    leaves a half-filled ``data.root`` that a rerun would take for finished."""
    root, s = Path(data.root), data.synthetic
    if s is None or root.exists():
        return
    generator = format_of(data).synthetic
    if generator is None:
        raise CapawareError("data.synthetic", f"format {data.format!r} has no embedded default",
                            f"remove data.synthetic, or put the dataset at {root}")
    partial = root.with_name(root.name + ".partial")
    if partial.exists():
        shutil.rmtree(partial)
    extra = {"n_val": s.n_val} if s.n_val is not None else {}  # caption sets only (the schema says)
    if getattr(s, "n_unlabeled", 0):  # caption sets: images without captions
        extra["n_unlabeled"] = s.n_unlabeled
    registry.imported(generator)(out=partial, n_train=s.n_train, n_test=s.n_test, seed=s.seed, size=s.size, **extra)
    os.replace(partial, root)


def source_of(data, fmt: Format) -> Source:
    root = Path(data.root)
    return Source(root, root / (data.annotation or fmt.annotation),
                  Path(data.image_root) if data.image_root else None,
                  root / data.split_file if data.split_file else None, data)


def read_records(data):
    """Records of the whole dataset that a config's ``data`` section names (generated first when it is
    the embedded default and missing)."""
    fmt = format_of(data)
    ensure_synthetic(data)
    records = fmt.read(source_of(data, fmt))
    if fmt.track == "caption":
        records.format = data.format  # caption records carry their format (module docstring)
    return records


def train_splits(data) -> tuple[str, ...]:
    return format_of(data).train_splits


def _pose_json(s: Source):
    from capdata.readers.pose_json import read_pose_json
    return read_pose_json(s.annotation)


def _mpii(s: Source):
    from capdata.readers.mpii import read_mpii
    return read_mpii(s.annotation, s.image_root or s.root / "images", split_file=s.split_file)


def _mpii_json(s: Source):  # the annotation is the folder holding train.json / valid.json
    from capdata.readers.mpii_json import read_mpii_json
    return read_mpii_json(s.annotation, s.image_root or s.root / "images")


def _lsun(s: Source):
    from capdata.readers.lsun import read_lsun
    return read_lsun(s.root, layout_type=s.options.layout_type, labels=s.options.layout_labels)


def _coco_captions(s: Source):  # the annotation is the split file naming COCO's caption files
    from capdata.readers.coco_captions import read_coco_captions

    return read_coco_captions(s.annotation, s.image_root)


def _coco_file(s: Source):  # one of COCO's own captions_*.json: no splits, every image of it
    from capdata.readers.coco_captions import read_coco_file_records

    return read_coco_file_records(s.annotation, s.image_root)


def _karpathy(s: Source):
    from capdata.readers.karpathy import read_karpathy
    return read_karpathy(s.annotation, s.image_root)


register_format("pose_json", Format("pose", "poses.json", _pose_json,
                                    synthetic="capdata.synthetic.poses:generate_poses"))
register_format("mpii", Format("pose", "mpii_human_pose_v1_u12_1.mat", _mpii))
register_format("mpii_json", Format("pose", "annot", _mpii_json))
register_format("lsun", Format("layout", "", _lsun, synthetic="capdata.synthetic.rooms:generate_rooms"))
def _is_dict_with(*keys: str, without: str | None = None) -> Callable[[Any], bool]:
    return lambda data: isinstance(data, dict) and set(keys) <= set(data) and without not in data


# Caption formats in sniffing order: COCO's annotation files also hold an "images" list.
register_format("coco_captions", Format("caption", "coco_splits.json", _coco_captions, ("train", "restval"),
                                        title="COCO-format", splits=KARPATHY_SPLITS,
                                        sniff=_is_dict_with("captions", "splits")))
register_format("coco_file", Format("caption", "captions_val2014.json", _coco_file, (), title="COCO captions file",
                                    splits=(), sniff=_is_dict_with("annotations")))
register_format("karpathy", Format("caption", "dataset_coco.json", _karpathy, ("train", "restval"),
                                   synthetic="capdata.synthetic.shapes_captions:generate_captions", title="Karpathy",
                                   splits=KARPATHY_SPLITS, sniff=_is_dict_with("images", without="annotations")))
