"""Caption datasets through the format table: one view of any caption format (``capdata.formats``).

Every stage that reads captions (the features' image lists, the captioners' labels and validation, the
scoring references, the probes, the reports) reads them here, by the format its config names
(``data.format`` / ``images.format``, default ``karpathy``), and asks the view what it needs: the records,
references by image id, image files by image id, the splits that train. So a new caption format is a reader
plus one ``register_format`` line, and no stage parses a caption file of its own.
"""
from __future__ import annotations

from pathlib import Path
from typing import NamedTuple

from capcore import plugins
from capcore.errors import CapawareError
from capdata.formats import FORMATS, Format, Source, formats_of
from capdata.records import CaptionRecords
from capdata.splits import ALL

DEFAULT = "karpathy"


def caption_format(name: str, where: str | Path = "format") -> Format:
    fmt = FORMATS.get(name) if plugins.knows(FORMATS, name) else None
    if fmt is None or fmt.track != "caption":
        raise CapawareError(where, f"{name!r} is not a caption format",
                            f"use one of {', '.join(formats_of('caption'))}")
    return fmt


def trainable_formats() -> tuple[str, ...]:
    """The caption formats with splits that train (a captioner's ``data.format``; a bare COCO file has none)."""
    return tuple(name for name in formats_of("caption") if FORMATS[name].train_splits)


def read_captions(annotation: str | Path, fmt: str | None = None,
                  image_root: str | Path | None = None) -> CaptionRecords:
    """Every image of the caption file ``annotation`` (all splits; filter with ``in_split``), read as format
    ``fmt``, or as the format the file shows when none is named (``detect_format``). The records carry it."""
    annotation = Path(annotation)
    name = fmt or detect_format(annotation)
    records = caption_format(name, annotation).read(Source(annotation.parent, annotation,
                                                           Path(image_root) if image_root else None, None, None))
    records.format = name
    return records


def format_of_records(records: CaptionRecords) -> Format:
    if records.format is None:
        raise CapawareError("records", "caption records without a format",
                            "read them with capdata.captions.read_captions or capdata.formats.read_records")
    return caption_format(records.format)


def train_splits(records: CaptionRecords) -> tuple[str, ...]:
    """The record splits that train (Karpathy's restval joins train, as is standard)."""
    return format_of_records(records).train_splits


def in_split(records: CaptionRecords, split: str) -> list[int]:
    """Indices of the records of ``split``: a record split, ``train`` (the format's training splits) or ``all``
    (also every record of a file without splits, whatever split is asked)."""
    fmt = format_of_records(records)
    keep = None if split == ALL or not fmt.splits else fmt.train_splits if split == "train" else (split,)
    return [i for i, s in enumerate(records.splits) if keep is None or s in keep]


def references(records: CaptionRecords, split: str = "test") -> dict[int, list[str]]:
    """{image id: its raw reference captions} of ``split`` (``in_split``), as the scorers take them."""
    return {int(records.image_ids[i]): list(records.raw[i]) for i in in_split(records, split)}


def image_files(records: CaptionRecords) -> dict[int, Path]:
    return {int(i): p for i, p in zip(records.image_ids, records.image_paths)}


def detect_format(path: str | Path) -> str:
    """The caption format of a file named without one (a scorer's ``--refs``, a run's recorded references): the
    first caption format of the table whose ``sniff`` knows the file. A file that cannot be parsed goes to the
    default format, whose reader then says what is wrong with it."""
    import json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DEFAULT
    for name in formats_of("caption"):
        if FORMATS[name].sniff is not None and FORMATS[name].sniff(data):
            return name
    raise CapawareError(path, "neither a caption file of a known format (Karpathy dataset_*.json, a COCO split "
                        "file) nor a COCO captions_*.json",
                        "give the Karpathy split file or COCO's annotations/captions_val2014.json, or name the "
                        "file's format")


class References(NamedTuple):
    """Reference captions and where they came from: ``fmt`` is the caption format that read them, ``split`` the
    split they are (None for a file without splits, such as one of COCO's own ``captions_*.json``: every image
    of it)."""
    refs: dict[int, list[str]]
    fmt: str
    split: str | None


def read_references(path: str | Path, split: str = "test", fmt: str | None = None) -> References:
    """References {image id: [raw captions]} of a caption file of any caption format (its ``split``, ``train``
    with the format's other training splits, or ``all``; read as ``fmt``, found from the file when not given),
    or of a file without splits (one of COCO's own ``captions_*.json``), every image of it. What the scorers
    take as ``--refs``."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "reference captions file not found", "check the path")
    records = read_captions(path, fmt)
    names = format_of_records(records).splits
    if names and split not in (*names, ALL):
        raise CapawareError(path, f"unknown split {split!r}", f"use one of {', '.join(names)}, all")
    refs = references(records, split)
    if not refs:
        raise CapawareError(path, f"no images in split {split!r}", "choose another --split")
    return References(refs, records.format, split if names else None)


def synthetic_note(path: str | Path) -> str | None:
    """What a caption file says it is when it is a synthetic set (the embedded default's json has a
    ``synthetic`` entry); None for a real dataset or a file that cannot be read."""
    import json

    try:
        note = json.loads(Path(str(path)).read_text(encoding="utf-8")).get("synthetic")
    except (OSError, ValueError, AttributeError):
        return None
    return str(note) if note else None
