"""Reading caption files: generated captions (``preds``) and reference captions (Karpathy json or a COCO
captions json). ``eval.score_captions`` scores them; ``eval.captions_discriminative`` measures novelty
against the training references.
"""
from __future__ import annotations

import json
from pathlib import Path

from capcore.errors import CapawareError
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


def load_refs(path: str | Path, split: str = "test") -> tuple[dict[int, list[str]], str]:
    """References {image_id: [raw captions]} and which kind of file they came from."""
    data = _read_json(path, "reference captions file")
    if isinstance(data, dict) and isinstance(data.get("images"), list) and data["images"] \
            and isinstance(data["images"][0], dict) and "sentences" in data["images"][0]:
        keep = {"train": ("train", "restval"), "all": KARPATHY_SPLITS}.get(split, (split,))
        if split not in (*KARPATHY_SPLITS, "all"):
            raise CapawareError(path, f"unknown split {split!r}", f"use one of {', '.join(KARPATHY_SPLITS)}, all")
        refs = {}
        for k, img in enumerate(data["images"]):
            try:
                if img.get("split") in keep:
                    image_id = int(img["cocoid"] if "cocoid" in img else img["imgid"])
                    refs[image_id] = [_sentence(s) for s in img["sentences"]]
            except (KeyError, TypeError, ValueError, AttributeError) as err:
                raise CapawareError(path, f"images[{k}] is not a Karpathy entry ({type(err).__name__}: {err}); "
                                    "need cocoid or imgid, split, sentences [{raw | tokens}]",
                                    "fix or regenerate the json") from None
        if not refs:
            raise CapawareError(path, f"no images in split {split!r}", "choose another --split")
        return refs, "karpathy"
    if isinstance(data, dict) and isinstance(data.get("annotations"), list):
        refs = {}
        for k, ann in enumerate(data["annotations"]):
            try:
                refs.setdefault(int(ann["image_id"]), []).append(str(ann["caption"]))
            except (KeyError, TypeError, ValueError) as err:
                raise CapawareError(path, f"annotations[{k}] is not {{\"image_id\": int, \"caption\": str}} "
                                    f"({type(err).__name__}: {err})", "fix the entry") from None
        if not refs:
            raise CapawareError(path, "no annotations", "point at a COCO captions_*.json")
        return refs, "coco"
    raise CapawareError(path, "neither a Karpathy dataset_*.json nor a COCO captions_*.json",
                        "give the Karpathy split file or COCO's annotations/captions_val2014.json")


def _sentence(s: dict) -> str:
    raw = s.get("raw")
    if isinstance(raw, str) and raw:
        return raw
    return " ".join(str(t) for t in s["tokens"])
