"""Open every file a dataset's records point at, before any training trusts them.

The readers parse annotation files only (COCO lists 123k images); this is the data stage's second
half (``capdata.prepare``), so a missing or truncated image, or a layout map that does not fit its
image, stops the pipeline in its first minutes instead of hours into stage one.

Checked, per record:

* the image exists and its pixel data decodes. PIL reads the header (format, size), then decodes:
  JPEG in draft mode (libjpeg's 1/8-scale DCT: cheaper than a full decode, yet the
  whole entropy-coded stream is still read, so a truncated file fails), any other format in full.
  ``Image.verify()`` would not do: for JPEG it checks nothing past the header, so a truncated COCO
  file would pass. The decoded pixels are thrown away; the image's size is the header's.
* layout track: the layout map reads (``capdata.readers.lsun.record_layout_map``, the loader stage one
  uses: numbering, corners and the split file's resolution) and its H x W equals the image's, so a map cannot be
  stretched onto the wrong image.

Reporting. Every record is checked (under a progress bar) and every problem collected, then
``check_records`` raises ONE ``CapawareError``: it names the first problem's file and record (index
in the records, image name, split) and counts the further problems by kind in the same line, e.g.
``... (record 3, COCO_val2014_000000000074.jpg, split test) and 3 more: 2 images that do not open,
1 image missing``. One line, as every capaware error, yet the user sees the whole extent at once
and can fix the set in one go instead of meeting the problems one rerun at a time; ``find_problems``
returns the full list for a caller that wants each one.
"""
from __future__ import annotations

import os
from collections import Counter
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from PIL import Image, UnidentifiedImageError
from tqdm import tqdm

from capcore.errors import CapawareError

# kind -> (count phrase for one, for several, the fix)
KINDS = {
    "missing": ("image missing", "images missing",
                "place the image there, pass the right image_root, or remove the entry"),
    "undecodable": ("image that does not open", "images that do not open",
                    "fix or replace the file, or remove its entry from the annotation file"),
    "map_unreadable": ("layout map that does not read", "layout maps that do not read",
                       "fix or regenerate the layout map, or remove the entry"),
    "map_size": ("layout map whose size differs from its image", "layout maps whose size differs from their image",
                 "regenerate the layout map from this very image, or remove the entry"),
}
CHUNK = 64  # records per task: few futures for 123k images, a progress bar that still moves


@dataclass(frozen=True)
class Problem:
    kind: str  # a key of KINDS
    path: Path  # the file at fault (the image or the layout map)
    index: int  # the record's index in the records (annotation order, after the reader's filters)
    image: str  # the record's image file name
    split: str
    what: str  # what is wrong, e.g. "cannot decode image (image file is truncated)"
    fix: str


@dataclass(frozen=True)
class CheckReport:
    n: int
    splits: dict[str, int]  # images per split, in sorted split order
    layout_maps: bool  # the layout maps were checked too

    def line(self, track: str) -> str:
        splits = ", ".join(f"{name} {count}" for name, count in self.splits.items())
        checked = "every image opens" + (" and its layout map fits it" if self.layout_maps else "")
        return f"{self.n} {track} images ({splits}): {checked}"


def image_size(path: str | Path) -> tuple[int, int]:
    """(width, height) of the image at ``path`` after decoding its pixel data (JPEG at 1/8 scale).

    Raises a CapawareError ("image not found" or "cannot decode image (reason)") otherwise.
    """
    path = Path(path)
    try:
        with Image.open(path) as img:
            size = img.size
            if img.format == "JPEG":
                img.draft(img.mode, (max(1, size[0] // 8), max(1, size[1] // 8)))
            img.load()
        return size
    except (FileNotFoundError, IsADirectoryError):
        raise CapawareError(path, "image not found", KINDS["missing"][2]) from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        if isinstance(err, UnidentifiedImageError):
            reason = "not a known image format, or corrupt"
        else:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CapawareError(path, f"cannot decode image ({reason})", KINDS["undecodable"][2]) from None


def _check_record(records, i: int, image: bool, maps: bool) -> list[Problem]:
    """Problems of record ``i``: its image (unless an earlier record shares it) and its layout map."""
    path = Path(records.image_paths[i])
    where = dict(index=i, image=path.name, split=str(records.splits[i]))
    problems, size = [], None
    if image or maps:
        try:
            size = image_size(path)
        except CapawareError as err:
            if image:
                kind = "missing" if err.problem.startswith("image not found") else "undecodable"
                problems.append(Problem(kind, path, what=err.problem, fix=err.fix or "", **where))
    if maps:
        from capdata.readers.lsun import (
            record_layout_map,  # here: scipy is needed by the layout track only
        )

        seg = Path(records.seg_paths[i])
        try:
            layout = record_layout_map(records, i)
        except CapawareError as err:
            problems.append(Problem("map_unreadable", Path(err.where), what=err.problem, fix=err.fix or "", **where))
        else:
            if size is not None and tuple(layout.shape) != (size[1], size[0]):
                h, w = layout.shape
                problems.append(Problem(
                    "map_size", seg, what=f"layout map is {h}x{w} (HxW), its image {size[1]}x{size[0]}",
                    fix=KINDS["map_size"][2], **where))
    return problems


def find_problems(records, progress: bool = True, workers: int | None = None,
                  desc: str = "checking images") -> list[Problem]:
    """Every problem of every record, in record order (empty: all good).

    An image shared by several records (MPII: one record per person) is opened once and a problem
    with it reported at its first record. Layout records (those with ``seg_paths``) get their maps
    checked too. Decoding runs in ``workers`` threads (PIL's decoders release the GIL); default:
    one per core, at most 8.
    """
    n = len(records)
    maps = getattr(records, "seg_paths", None) is not None
    seen: set = set()
    first_use = []
    for path in records.image_paths:
        first_use.append(path not in seen)
        seen.add(path)
    workers = workers or max(1, min(8, os.cpu_count() or 1))
    chunks = [range(lo, min(lo + CHUNK, n)) for lo in range(0, n, CHUNK)]

    def run(chunk: range) -> list[Problem]:
        return [p for i in chunk for p in _check_record(records, i, first_use[i], maps)]

    problems: list[Problem] = []
    with tqdm(total=n, desc=desc, unit="img", leave=False, disable=not progress) as bar:
        with ThreadPoolExecutor(workers) as pool:
            for chunk, found in zip(chunks, pool.map(run, chunks)):
                problems.extend(found)
                bar.update(len(chunk))
    return problems


def problem_error(problems: list[Problem]) -> CapawareError:
    """The one-line error: the first problem (file, record) and the further ones counted by kind."""
    first = problems[0]
    text = f"{first.what} (record {first.index}, {first.image}, split {first.split})"
    rest = Counter(p.kind for p in problems[1:])
    if rest:
        counts = ", ".join(f"{count} {KINDS[kind][0] if count == 1 else KINDS[kind][1]}"
                           for kind, count in sorted(rest.items(), key=lambda kv: (-kv[1], kv[0])))
        text += f"; and {len(problems) - 1} more: {counts}"
    return CapawareError(first.path, text, first.fix)


def check_records(records, progress: bool = True, workers: int | None = None,
                  desc: str = "checking images") -> CheckReport:
    """Check every record's files; raise one CapawareError (see the module doc) or return the counts."""
    problems = find_problems(records, progress=progress, workers=workers, desc=desc)
    if problems:
        raise problem_error(problems)
    splits = dict(sorted(Counter(map(str, records.splits)).items()))
    return CheckReport(len(records), splits, getattr(records, "seg_paths", None) is not None)


__all__ = ["check_records", "find_problems", "image_size", "problem_error", "Problem", "CheckReport"]
