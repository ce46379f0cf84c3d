"""Reader for COCO's own caption release, ``annotations/captions_{train,val}2014.json``, with a split file.

COCO's files hold no splits; the Karpathy splits (or a user's own) come from a small split file, which is the
annotation a config names (format ``coco_captions``)::

    {"captions": ["annotations/captions_train2014.json", "annotations/captions_val2014.json"],
     "splits": {"train": [cocoid, ...], "restval": [...], "val": [...], "test": [...]}}

Caption files are paths relative to the split file's folder. Each one is COCO's format::

    {"images": [{"id": 391895, "file_name": "COCO_val2014_000000391895.jpg", "width": 640, "height": 360}, ...],
     "annotations": [{"image_id": 391895, "id": 770337, "caption": "A man with a red helmet ..."}, ...]}

An image's file is ``image_root / <folder> / file_name``, the folder named by its caption file
(``captions_val2014.json`` -> ``val2014``), as COCO releases them; image_root defaults to the split file's folder.
Only the images the split file lists are read, in its order (train, restval, val, test), each with its
captions in annotation order. Tokens are the raw caption lower-cased, punctuation dropped, split on white space
(Karpathy's preprocessing); scoring uses the raw captions (pycocoevalcap's PTB tokenizer), so the scores of
the same images equal those from Karpathy's json. Format notes: docs/data_formats/caption.md.
"""
from __future__ import annotations

import re
import string
from pathlib import Path

import numpy as np

from capcore.errors import CapawareError
from capdata.readers.karpathy import KARPATHY_SPLITS, read_json_file
from capdata.records import CaptionRecords
from capdata.splits import ALL

PUNCTUATION = re.compile(f"[{re.escape(string.punctuation)}]")


def tokens(caption: str) -> list[str]:
    return PUNCTUATION.sub("", caption.lower()).split()


def read_coco_file(path: Path) -> tuple[dict[int, dict], dict[int, list[str]]]:
    """One COCO captions json: its images by id, and each image's captions in annotation order."""
    data = read_json_file(path, "COCO captions file")
    if not isinstance(data, dict) or not isinstance(data.get("annotations"), list):
        raise CapawareError(path, "no 'annotations' list at the top level", "point at COCO's captions_*.json")
    images, captions = {}, {}
    for k, im in enumerate(data.get("images") or []):
        try:
            images[int(im["id"])] = im
        except (KeyError, TypeError, ValueError) as err:
            raise CapawareError(path, f"images[{k}] has no integer 'id' ({type(err).__name__})",
                                "fix the entry") from None
    for k, ann in enumerate(data["annotations"]):
        try:
            captions.setdefault(int(ann["image_id"]), []).append(str(ann["caption"]))
        except (KeyError, TypeError, ValueError) as err:
            raise CapawareError(path, f"annotations[{k}] is not {{\"image_id\": int, \"caption\": str}} "
                                f"({type(err).__name__}: {err})", "fix the entry") from None
    return images, captions


def read_coco_captions(split_file: str | Path, image_root: str | Path | None = None) -> CaptionRecords:
    """The images a split file lists, with their captions from COCO's caption files (module docstring)."""
    split_file = Path(split_file).resolve()
    spec = read_json_file(split_file, "split file of COCO captions")
    if (not isinstance(spec, dict) or not isinstance(spec.get("captions"), list)
            or not isinstance(spec.get("splits"), dict)):
        raise CapawareError(split_file, "not a split file: needs 'captions' (COCO caption files) and 'splits' "
                            "({split: [image ids]})", "see docs/data_formats/caption.md")
    unknown = sorted(set(spec["splits"]) - set(KARPATHY_SPLITS))
    if unknown:
        raise CapawareError(split_file, f"unknown split(s) {unknown}", f"use {', '.join(KARPATHY_SPLITS)}")
    root = Path(image_root).resolve() if image_root is not None else split_file.parent
    where, captions = {}, {}
    for name in spec["captions"]:
        path = split_file.parent / name
        images, caps = read_coco_file(path)
        folder = path.stem.removeprefix("captions_")
        for image_id, im in images.items():
            where[image_id] = (root / folder / str(im.get("file_name", "")), im)
        captions.update(caps)
    paths, splits, ids, toks, raws, sizes = [], [], [], [], [], []
    for split in KARPATHY_SPLITS:
        for image_id in spec["splits"].get(split, []):
            image_id = int(image_id)
            if image_id not in where or not captions.get(image_id):
                raise CapawareError(split_file, f"image {image_id} ({split}) has no "
                                    f"{'entry' if image_id not in where else 'caption'} "
                                    f"in {', '.join(spec['captions'])}", "list only images of those files")
            path, im = where[image_id]
            paths.append(path)
            splits.append(split)
            ids.append(image_id)
            raws.append(captions[image_id])
            toks.append([tokens(c) or ["unk"] for c in captions[image_id]])
            sizes.append((im.get("width"), im.get("height")))
    if not paths:
        raise CapawareError(split_file, "the split file lists no images", "list the images of each split")
    known = all(isinstance(v, (int, float)) for wh in sizes for v in wh)
    return CaptionRecords(image_paths=paths, splits=np.array(splits), image_ids=np.array(ids, dtype=np.int64),
                          captions=toks, raw=raws, sizes=np.array(sizes, dtype=np.float64) if known else None)


def read_coco_file_records(path: str | Path, image_root: str | Path | None = None) -> CaptionRecords:
    """Every image of one COCO ``captions_*.json`` with a caption, in id order, as records of no split (format
    ``coco_file``: what a scorer's ``--refs`` may name). Image files as in a split file's release:
    ``image_root / <folder> / file_name``, image_root defaulting to the file's own folder."""
    path = Path(path).resolve()
    images, captions = read_coco_file(path)
    ids = sorted(captions)
    if not ids:
        raise CapawareError(path, "no annotations", "point at a COCO captions_*.json")
    folder = (Path(image_root).resolve() if image_root is not None else path.parent) / path.stem.removeprefix(
        "captions_")
    return CaptionRecords(image_paths=[folder / str(images.get(i, {}).get("file_name", "")) for i in ids],
                          splits=np.array([ALL] * len(ids)), image_ids=np.array(ids, dtype=np.int64),
                          captions=[[tokens(c) or ["unk"] for c in captions[i]] for i in ids],
                          raw=[captions[i] for i in ids])
