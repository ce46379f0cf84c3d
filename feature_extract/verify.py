"""Check a features file before a long stage-three run trusts it.

``python -m feature_extract.verify FILE [--images dataset_coco.json]``: structure (datasets, shapes,
dtype, the identity attributes, complete flag), no NaN/Inf (scanned in blocks, so memory stays flat),
and with ``--images`` that the ids are the json's, in order. Prints one line per problem, each
``FILE: problem``, and exits 1; "ok: ..." and 0.

It never prints a traceback: a missing file, a file that is not HDF5, a missing dataset or attribute,
or anything else that stops the file from being read becomes such a line (the exception's type is
kept in it, so a bug in here still shows what it was). An interrupted dump is named a partial dump
with how many images are done; a missing FILE whose ``FILE.partial`` exists says so. A failure of
the command itself (an unreadable ``--images`` json) is one ``CapawareError`` line too (``run_cli``).
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import h5py
import numpy as np

from capcore.errors import CapawareError, run_cli
from capdata.captions import read_captions
from feature_extract.row_labels import label_of
from feature_extract.h5io import _first, check_structure, missing_note, read_attrs


def scan_finite(dset: h5py.Dataset, block: int = 256) -> list[int]:
    """Rows holding NaN or Inf (skipped rows are zeros, so they are checked too)."""
    bad = []
    for lo in range(0, dset.shape[0], block):
        rows = dset[lo:lo + block]
        flat = rows.reshape(len(rows), -1)
        bad.extend(lo + np.flatnonzero(~np.isfinite(flat).all(1)))
    return [int(i) for i in bad]


def expected_ids(json_path: str, image_root: str | None, splits: list[str], fmt: str | None = None) -> np.ndarray:
    records = read_captions(json_path, fmt, image_root)
    keep = np.isin(records.splits, splits) if splits else np.ones(len(records), bool)
    return records.image_ids[keep]


def verify(path: str | Path, images: str | None = None) -> list[str]:
    """Problems found in the file, as one-line strings (empty: the file is good)."""
    path = Path(path)
    if not path.is_file():
        return [f"file {missing_note(path)}"]
    try:
        f = h5py.File(path, "r")
    except Exception as err:  # OSError for a truncated or non-HDF5 file; never a traceback
        return [f"not a readable HDF5 file, truncated or damaged ({_first(err)})"]
    with f:
        try:
            problems = check_structure(f)
            if any(p.startswith(("not a capaware", "missing dataset")) for p in problems):
                return problems
            attrs = read_attrs(f)
            n_done = int(attrs.get("n_done", 0))
            for name in ("att", "fc"):
                bad = [i for i in scan_finite(f[name]) if i < n_done]
                if bad:
                    problems.append(f"{name} has NaN/Inf in {len(bad)} row(s), first row {bad[0]}")
            ids = f["image_id"][()]
            if len(np.unique(ids)) != len(ids):
                problems.append(f"image_id has {len(ids) - len(np.unique(ids))} duplicate(s)")
            if images:
                want = expected_ids(images, None, json.loads(attrs.get("splits", "[]")),
                                    attrs.get("images_format"))
                have = ids
                if len(want) != len(have):
                    problems.append(f"{len(have)} image ids, {images} lists {len(want)}")
                elif not np.array_equal(want, have):
                    first = int(np.flatnonzero(want != have)[0])
                    problems.append(f"image_id differs from {images} at row {first} "
                                    f"(file {have[first]}, json {want[first]})")
        except OSError as err:  # a chunk past the end of a truncated file
            problems = [f"unreadable data, truncated or damaged ({_first(err)})"]
        except CapawareError:  # an unreadable --images json: the command's error, not the file's
            raise
        except Exception as err:  # an attribute or dataset of another type than a dump writes
            problems = [f"malformed features file ({type(err).__name__}: {_first(err)})"]
    return problems


def ok_line(path: str | Path) -> str:
    """The one-line description of a good file, ending in its row label: the file's own ``label`` attribute when its
    config set one (ViT-Ti, Attr), else the backbone kind's (Img, Cap, Oracle, Custom)."""
    with h5py.File(path, "r") as f:
        a = read_attrs(f)
        n_skipped = int(f["skipped"][()].sum()) if "skipped" in f else 0
        att = f["att"]
        return (f"ok: {path}: {att.shape[0]} images ({n_skipped} skipped), att {list(att.shape)} {att.dtype}, "
                f"{a.get('backbone')} {a.get('arch')} ({str(a.get('checkpoint_sha256'))[:23]}) -> "
                f"{label_of(str(a.get('backbone')), str(a.get('label', '')))}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("file")
    parser.add_argument("--images", help="Karpathy json whose ids (in the file's splits) must match")
    args = parser.parse_args(argv)
    try:
        problems = verify(args.file, args.images)
    except CapawareError as err:  # e.g. an unreadable --images json
        problems = [str(err)]
    if not problems:
        try:
            line = ok_line(args.file)
        except Exception as err:  # verify found nothing, so this is only defence in depth
            problems = [f"malformed features file ({type(err).__name__}: {_first(err)})"]
    if problems:
        for problem in problems:
            print(f"{args.file}: {problem}", file=sys.stderr)
        raise SystemExit(1)
    print(line)


if __name__ == "__main__":
    run_cli(main)
