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

DEFAULT = "karpathy"
ALL = "all"


def caption_format(name: str, where: str | Path = "format") -> Format:
    fmt = FORMATS.get(name) if plugins.knows(FORMATS, name) else None
    if fmt is None or fmt.track != "caption":
        raise CapawareError(where, f"{name!r} is not a caption format",
                            f"use one of {', '.join(formats_of('caption'))}")
    return fmt


def read_captions(annotation: str | Path, fmt: str = DEFAULT, image_root: str | Path | None = None) -> CaptionRecords:
    """Every image of the caption file ``annotation`` in format ``fmt`` (all splits; filter with ``in_split``)."""
    annotation = Path(annotation)
    return caption_format(fmt, annotation).read(Source(annotation.parent, annotation,
                                                       Path(image_root) if image_root else None, None, None))


def train_splits(fmt: str = DEFAULT) -> tuple[str, ...]:
    """The record splits that train (Karpathy's restval joins train, as is standard)."""
    return caption_format(fmt).train_splits


def in_split(records: CaptionRecords, split: str, fmt: str = DEFAULT) -> list[int]:
    """Indices of the records of ``split``: a record split, ``train`` (the format's training splits) or ``all``."""
    keep = train_splits(fmt) if split == "train" else None if split == ALL else (split,)
    return [i for i, s in enumerate(records.splits) if keep is None or s in keep]


def references(records: CaptionRecords, split: str = "test", fmt: str = DEFAULT) -> dict[int, list[str]]:
    """{image id: its raw reference captions} of ``split`` (``in_split``), as the scorers take them."""
    return {int(records.image_ids[i]): list(records.raw[i]) for i in in_split(records, split, fmt)}


def image_files(records: CaptionRecords) -> dict[int, Path]:
    return {int(i): p for i, p in zip(records.image_ids, records.image_paths)}


def detect_format(path: str | Path) -> str:
    """The caption format of a file named without one (a scorer's ``--refs``, a run's recorded references):
    ``coco_captions`` for a split file (``captions`` and ``splits``), else ``karpathy``. A file that is neither
    is then refused by that format's reader, in one line."""
    import json

    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return DEFAULT  # the reader says what is wrong with it
    return format_of_data(data)


def format_of_data(data) -> str:
    """``detect_format`` of a caption file already parsed (a caller that read it need not read it again)."""
    return "coco_captions" if isinstance(data, dict) and {"captions", "splits"} <= set(data) else DEFAULT


class References(NamedTuple):
    """Reference captions and where they came from: ``fmt`` is the caption format that read them (None for one
    of COCO's own ``captions_*.json`` files, which has no splits and is not a format of the table), ``split`` the
    split they are (None for such a file: every image of it)."""
    refs: dict[int, list[str]]
    fmt: str | None
    split: str | None


def read_references(path: str | Path, split: str = "test", fmt: str | None = None) -> References:
    """References {image id: [raw captions]} of a caption file of any caption format (its ``split``, ``train``
    with the format's other training splits, or ``all``; read as ``fmt``, found from the file when not given),
    or of one of COCO's own ``captions_*.json`` files, every image of it. What the scorers take as ``--refs``."""
    import json

    if fmt is None:
        path = Path(path)
        if not path.is_file():
            raise CapawareError(path, "reference captions file not found", "check the path")
        try:
            data = json.loads(path.read_text(encoding="utf-8"))
        except (json.JSONDecodeError, UnicodeDecodeError) as err:
            raise CapawareError(path, f"not valid JSON ({err})", "rewrite the reference captions file") from None
        if isinstance(data, dict) and isinstance(data.get("annotations"), list):  # a bare COCO captions file
            from capdata.readers.coco_captions import read_coco_file

            refs = read_coco_file(path)[1]
            if not refs:
                raise CapawareError(path, "no annotations", "point at a COCO captions_*.json")
            return References(refs, None, None)
        if not (isinstance(data, dict) and ({"images", "captions"} & set(data))):
            raise CapawareError(path, "neither a caption file (Karpathy dataset_*.json, a COCO split file) nor a "
                                "COCO captions_*.json",
                                "give the Karpathy split file or COCO's annotations/captions_val2014.json")
        fmt = format_of_data(data)
    names = caption_format(fmt, path).splits
    if split not in (*names, ALL):
        raise CapawareError(path, f"unknown split {split!r}", f"use one of {', '.join(names)}, all")
    refs = references(read_captions(path, fmt), split, fmt)
    if not refs:
        raise CapawareError(path, f"no images in split {split!r}", "choose another --split")
    return References(refs, fmt, split)


def synthetic_note(path: str | Path) -> str | None:
    """What a caption file says it is when it is a synthetic set (the embedded default's json has a
    ``synthetic`` entry); None for a real dataset or a file that cannot be read."""
    import json

    try:
        note = json.loads(Path(str(path)).read_text(encoding="utf-8")).get("synthetic")
    except (OSError, ValueError, AttributeError):
        return None
    return str(note) if note else None
