"""``capaware caption --model model.capaware IMAGES_OR_FOLDERS... [--out preds.json] [--beam N]
[--attention DIR] [--skip-bad] [--ids auto|names|positions]``: caption your own images.

Any images: files as given, folders as their image files (recursive, sorted), whatever their names.
Prints ``path<TAB>caption`` per image on stdout (the progress bar and the summary go to stderr, so
stdout pipes cleanly); ``--out`` writes COCO-results JSON ``[{"image_id", "file_name", "caption"}]``.
Its ids (``--ids auto``, the default): the file names' trailing digits when every name ends in digits and
no two share a number (COCO_val2014_000000391895.jpg -> 391895: COCO's ids, so ``capaware score`` can
score them); else the positions 0..n-1 in the order captioned, with one note line on stderr (with --out) when
the names mix the two kinds or repeat a number. ``--ids names`` refuses such names instead (for scoring against
references, where ids must match); ``--ids positions`` always numbers 0..n-1. ``--attention DIR`` draws, per
image, where each word looked. A bad file stops the command, naming it and the fix; with ``--skip-bad`` the
rest are captioned, the skipped files are listed at the end and the exit status is 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Iterator

from capcore.atomic import write_text
from capcore.errors import CapawareError
from feature_extract.sources import IMAGE_SUFFIXES, folder_ids, name_number, same_number

KEEP_COCO_IDS = "name every image by its id, as COCO_val2014_000000391895.jpg, to keep COCO's ids"


def collect(inputs: list[str]) -> list[Path]:
    """Files as given, folders as their image files (recursive, sorted)."""
    paths: list[Path] = []
    for given in map(Path, inputs):
        if given.is_dir():
            found = sorted(p for p in given.rglob("*") if p.suffix.lower() in IMAGE_SUFFIXES and p.is_file())
            if not found:
                raise CapawareError(given, f"no image files ({' '.join(IMAGE_SUFFIXES)}) in the folder",
                                    "point at a folder of images, or at the files themselves")
            paths += found
        elif given.is_file():
            paths.append(given)
        else:
            raise CapawareError(given, "no such file or folder", "check the path")
    return paths


def image_ids(paths: list[Path], how: str) -> tuple[list[int], str]:
    """``--out``'s image ids by ``--ids``, and the note that says they are positions where names of both kinds
    (or two names ending in the same number) made ``auto`` give up the names' digits ("" when none)."""
    positions = list(range(len(paths)))
    if how == "positions":
        return positions, ""
    if how == "names":  # scoring: ids must be the references' ids, so names that cannot give them are refused
        return folder_ids(paths, "pass --ids positions").tolist(), ""
    numbers = [name_number(p) for p in paths]
    twins = same_number(paths, numbers)
    if None not in numbers and not twins:
        return numbers, ""
    n, numbered = len(paths), len(paths) - numbers.count(None)
    if not numbered:
        return positions, ""  # no name carries an id: nothing is given up
    why = (f"{numbered} of {n} image names end in digits and {n - numbered} do not" if numbered < n
           else f"{' and '.join(twins)} end in the same number")
    return positions, f"note: {why}: --out gives positions 0-{n - 1} as image ids ({KEEP_COCO_IDS})"


def at_least_one(text: str) -> int:
    """--beam and --batch-size: checked here, so a bad one is argparse's usage line naming the flag."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a whole number: {text!r}") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be >= 1, got {value}")
    return value


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="capaware caption", description="Caption images with an exported model.",
                                epilog="example: capaware caption --model model.capaware photos/ --out preds.json")
    p.add_argument("images", nargs="+", help="image files and/or folders (searched recursively), any names")
    p.add_argument("--model", required=True, help="the .capaware file written by capaware export")
    p.add_argument("--out", default=None, help="also write COCO-results JSON here")
    p.add_argument("--beam", type=at_least_one, default=None, help="beam width (default: the model's, 1 = greedy)")
    p.add_argument("--attention", default=None, help="folder for one PNG per image: where each word looked")
    p.add_argument("--skip-bad", action="store_true", help="caption the rest when a file cannot be read")
    p.add_argument("--batch-size", type=at_least_one, default=16)
    p.add_argument("--device", default="auto", help="auto (a GPU when there is one) | cpu | cuda")
    p.add_argument("--precision", default="auto", help="auto (bfloat16 only where native) | float32 | bfloat16")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--ids", choices=("auto", "names", "positions"), default="auto",
                   help="image ids in --out: auto (default: the file names' trailing digits when every name ends "
                        "in digits and no two share a number, as COCO's, so capaware score can score them; else "
                        "positions, with a note when names mix the two kinds) | names (the trailing digits; names "
                        "with and without them, or sharing a number, are refused: for scoring) | positions "
                        "(0..n-1 in the order captioned)")
    return p


def bad_file_flag(captioned: Iterator) -> Iterator:
    """The captioner's bad-file error names its Python argument (skip_bad=True); here, this command's flag."""
    from capaware.captioner import BadImageError

    try:
        yield from captioned
    except BadImageError as err:
        raise BadImageError(err.where, err.problem, skip="pass --skip-bad") from None


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    from capaware.captioner import ImageCaptioner  # after parsing: --help without importing torch
    from eval.attention_maps import plot_attention

    paths = collect(a.images)
    ids, note = image_ids(paths, a.ids)  # before the model loads: --ids names refuses in its first second
    captioner = ImageCaptioner.load(a.model, a.device, a.precision)
    if captioner.file.provenance.get("synthetic_data"):
        print(f"note: this model learned from {captioner.file.provenance['synthetic_data']}", file=sys.stderr)
    if note and a.out:  # the ids are --out's: without it there is nothing to say
        print(note, file=sys.stderr)
    done, skipped = [], []
    start = time.perf_counter()
    captioned = captioner.run(paths, a.beam, a.batch_size, attention=bool(a.attention), skip_bad=a.skip_bad,
                              progress=not a.no_progress and len(paths) > 1)
    for k, c in enumerate(bad_file_flag(captioned)):
        if c.error:
            skipped.append(c)
            continue
        print(f"{c.source}\t{c.caption}", flush=True)
        done.append((ids[k], c))
        if a.attention:
            plot_attention(c.image, c.caption.split(), c.attention, captioner.grid,
                           Path(a.attention) / f"{k:05d}_{Path(c.source).stem}.png", c.caption)
    seconds = time.perf_counter() - start
    if a.out:
        rows = [{"image_id": i, "file_name": c.source, "caption": c.caption} for i, c in done]
        write_text(a.out, "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    where = f"{captioner.device.type}, {captioner.extract.precision}"
    print(f"caption: {len(done)} images in {seconds:.1f} s ({len(done) / max(seconds, 1e-9):.1f} images/s, {where})"
          + (f" -> {a.out}" if a.out else ""), file=sys.stderr)
    if skipped:
        print(f"skipped {len(skipped)} file(s):", file=sys.stderr)
        for c in skipped:
            print(f"  {c.source}: {c.error}", file=sys.stderr)
    return 1 if skipped else 0
