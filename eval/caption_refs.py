"""Reading caption files: generated captions (``preds``) and reference captions (Karpathy json or a COCO
captions json). ``eval.score_captions`` scores them; ``eval.captions_discriminative`` measures novelty
against the training references.
"""
from __future__ import annotations

import json
from pathlib import Path
from typing import NamedTuple

from capcore.errors import CapawareError
from capdata.captions import ALL, format_of_data, read_captions, references
from capdata.readers.karpathy import KARPATHY_SPLITS


def _read_json(path: str | Path, what: str):
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, f"{what} not found", "check the path")
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CapawareError(path, f"not valid JSON ({err})", f"rewrite the {what}") from None


def load_preds(path: str | Path) -> dict[int, str]:
    """COCO results JSON -> {image_id: caption}; duplicates and malformed entries are errors."""
    data = _read_json(path, "predictions file")
    if not isinstance(data, list) or not data:
        raise CapawareError(path, "expected a non-empty list of {\"image_id\", \"caption\"}",
                            "write COCO results format (python -m captioners.predict does)")
    preds: dict[int, str] = {}
    for k, row in enumerate(data):
        if not isinstance(row, dict) or not isinstance(row.get("caption"), str) or "image_id" not in row:
            raise CapawareError(path, f"entry {k} is not {{\"image_id\": int, \"caption\": str}}", "fix the entry")
        try:
            image_id = int(row["image_id"])
        except (TypeError, ValueError):
            raise CapawareError(path, f"entry {k}: image_id {row['image_id']!r} is not an integer",
                                "fix the entry") from None
        if image_id in preds:
            raise CapawareError(path, f"image {image_id} has more than one prediction", "keep one caption per image")
        preds[image_id] = row["caption"]
    return preds


class References(NamedTuple):
    """Reference captions and where they came from: ``fmt`` is the caption format that read them (None for one
    of COCO's own ``captions_*.json`` files, which is not a format of the table), ``split`` the split they are
    (None for a file without splits: every image of it)."""
    refs: dict[int, list[str]]
    fmt: str | None
    split: str | None


def load_refs(path: str | Path, split: str = "test", fmt: str | None = None) -> References:
    """References {image_id: [raw captions]} of a caption file of any caption format (its ``split``, ``train``
    with restval, or ``all``; read by ``capdata.captions`` as ``fmt``, found from the file when not given), or of
    one of COCO's own ``captions_*.json`` files, every image of it."""
    if fmt is not None:  # a caption format named by the run's config (a plugin's is never guessed)
        if split not in (*KARPATHY_SPLITS, ALL):
            raise CapawareError(path, f"unknown split {split!r}", f"use one of {', '.join(KARPATHY_SPLITS)}, all")
        return References(references(read_captions(path, fmt), split, fmt), fmt, split)
    data = _read_json(path, "reference captions file")
    if isinstance(data, dict) and isinstance(data.get("annotations"), list):  # a bare COCO captions file
        from capdata.readers.coco_captions import read_coco_file

        refs = read_coco_file(Path(path))[1]
        if not refs:
            raise CapawareError(path, "no annotations", "point at a COCO captions_*.json")
        return References(refs, None, None)
    if not (isinstance(data, dict) and ({"images", "captions"} & set(data))):
        raise CapawareError(path, "neither a caption file (Karpathy dataset_*.json, a COCO split file) nor a COCO "
                            "captions_*.json",
                            "give the Karpathy split file or COCO's annotations/captions_val2014.json")
    fmt = format_of_data(data)
    if split not in (*KARPATHY_SPLITS, ALL):
        raise CapawareError(path, f"unknown split {split!r}", f"use one of {', '.join(KARPATHY_SPLITS)}, all")
    refs = references(read_captions(path, fmt), split, fmt)
    if not refs:
        raise CapawareError(path, f"no images in split {split!r}", "choose another --split")
    return References(refs, fmt, split)
