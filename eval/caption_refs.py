"""Reading generated captions (``preds``, COCO's results format). Reference captions are a dataset's and are read
by ``capdata.captions.read_references``, like every caption file.
"""
from __future__ import annotations

import json
from pathlib import Path

from capcore.errors import CapawareError


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
