"""Reader for Karpathy's caption split file ``dataset_coco.json`` (also used for Flickr8k/30k).

Format (as released with NeuralTalk2 and read by every captioning codebase since)::

    {"images": [{"filepath": "val2014", "filename": "COCO_val2014_000000391895.jpg",
                 "imgid": 0, "cocoid": 391895, "split": "test",
                 "sentences": [{"tokens": ["a", "man", ...], "raw": "A man ...", "sentid": 770337,
                                "imgid": 0}, ...],
                 "sentids": [...]}, ...],
     "dataset": "coco"}

Flickr files have no ``filepath`` and no ``cocoid`` (they carry ``imgid`` only); both are accepted.
The image path is ``image_root / filepath / filename``. Image files are not touched here; the
pipeline's data stage opens every one (``capdata.check_data``). Format notes: docs/data_formats/caption.md.
"""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np

from capcore.errors import CapawareError
from capdata.images import check_images_exist
from capdata.readers.entries import check_entry, entry_error
from capdata.records import CaptionRecords
from capdata.splits import KARPATHY_SPLITS

__all__ = ["read_karpathy", "check_images_exist", "read_json_file", "KARPATHY_SPLITS"]


def read_json_file(path: str | Path, what: str) -> object:
    """Parse a JSON file, turning a missing file or a syntax error into one CapawareError line."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, f"{what} not found", "check the path (or download the file)")
    try:
        with open(path, encoding="utf-8") as f:
            return json.load(f)
    except json.JSONDecodeError as err:
        raise CapawareError(
            path, f"not valid JSON ({err.msg} at line {err.lineno}, column {err.colno})",
            f"re-download or regenerate the {what}",
        ) from None
    except UnicodeDecodeError:
        raise CapawareError(path, "not valid JSON (not UTF-8 text)", f"re-download the {what}") from None


def read_karpathy(json_path: str | Path, image_root: str | Path | None = None) -> CaptionRecords:
    """All images of a Karpathy split file, every split included (filter with ``records.select``)."""
    json_path = Path(json_path).resolve()
    root = Path(image_root).resolve() if image_root is not None else json_path.parent
    data = read_json_file(json_path, "Karpathy caption file")
    if not isinstance(data, dict) or not isinstance(data.get("images"), list):
        raise CapawareError(json_path, "no 'images' list at the top level",
                            "this must be a Karpathy dataset_*.json file")

    paths, splits, ids, captions, raws, cats, attrs, objs, sizes = [], [], [], [], [], [], [], [], []
    for i, img in enumerate(data["images"]):
        bad = entry_error(json_path, i, img, "filename")
        check_entry(img, ("filename", "split", "sentences"), bad)
        if "cocoid" not in img and "imgid" not in img:
            raise bad("missing both 'cocoid' and 'imgid'")
        if img["split"] not in KARPATHY_SPLITS:
            raise bad(f"unknown split {img['split']!r} (expected one of {', '.join(KARPATHY_SPLITS)})")
        sents = img["sentences"]
        if not isinstance(sents, list) or not sents:
            raise bad("has no sentences", "every image needs at least one caption; remove the entry")
        toks, raw = [], []
        for j, s in enumerate(sents):
            if not isinstance(s, dict) or not isinstance(s.get("tokens"), list) or not s["tokens"]:
                raise bad(f"sentence {j} has no tokens", "tokenise the captions (lower-case words)")
            if not all(isinstance(t, str) for t in s["tokens"]):
                raise bad(f"sentence {j} has a token that is not a string")
            toks.append(list(s["tokens"]))
            raw.append(str(s.get("raw", " ".join(s["tokens"]))))
        image_id = img["cocoid"] if "cocoid" in img else img["imgid"]
        try:
            image_id = int(image_id)
        except (TypeError, ValueError):
            raise bad(f"image id {image_id!r} is not an integer") from None

        paths.append(root / str(img.get("filepath", "")) / str(img["filename"]))
        splits.append(img["split"])
        ids.append(image_id)
        captions.append(toks)
        raws.append(raw)
        cats.append(img.get("categories"))
        attrs.append(img.get("attributes"))
        objs.append(img.get("objects"))
        sizes.append((img.get("width"), img.get("height")))

    if not paths:
        raise CapawareError(json_path, "the 'images' list is empty", "point at a non-empty caption file")
    # Categories are only meaningful if every image has them (the synthetic set writes them).
    categories = [list(c) for c in cats] if all(isinstance(c, list) for c in cats) else None
    attributes = ([{str(g): [str(v) for v in vals] for g, vals in a.items()} for a in attrs]
                  if all(isinstance(a, dict) for a in attrs) else None)
    objects = objs if all(isinstance(o, list) for o in objs) else None
    known = all(isinstance(v, (int, float)) for wh in sizes for v in wh)
    return CaptionRecords(
        image_paths=paths, splits=np.array(splits), image_ids=np.array(ids, dtype=np.int64),
        captions=captions, raw=raws, categories=categories, attributes=attributes, objects=objects,
        sizes=np.array(sizes, dtype=np.float64) if known else None,
    )
