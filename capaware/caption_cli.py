"""``capaware caption --model model.capaware IMAGES_OR_FOLDERS... [--out preds.json] [--beam N]
[--attention DIR] [--skip-bad]``: caption your own images.

Prints ``path<TAB>caption`` per image on stdout (the progress bar and the summary go to stderr, so
stdout pipes cleanly); ``--out`` writes COCO-results JSON ``[{"image_id", "file_name", "caption"}]``
(ids: the file names' trailing digits when unique, as COCO_val2014_000000391895.jpg -> 391895, so
``capaware score`` can score them against COCO; else the position); ``--attention DIR`` draws, per
image, where each word looked. A bad file stops the command, naming it and the fix; with
``--skip-bad`` the rest are captioned, the skipped files are listed at the end and the exit status is 1.
"""
from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

from capcore.atomic import write_text
from capcore.errors import CapawareError
from feature_extract.sources import IMAGE_SUFFIXES, folder_ids


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


def parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="capaware caption", description="Caption images with an exported model.",
                                epilog="example: capaware caption --model model.capaware photos/ --out preds.json")
    p.add_argument("images", nargs="+", help="image files and/or folders (searched recursively)")
    p.add_argument("--model", required=True, help="the .capaware file written by capaware export")
    p.add_argument("--out", default=None, help="also write COCO-results JSON here")
    p.add_argument("--beam", type=int, default=None, help="beam width (default: the model's, 1 = greedy)")
    p.add_argument("--attention", default=None, help="folder for one PNG per image: where each word looked")
    p.add_argument("--skip-bad", action="store_true", help="caption the rest when a file cannot be read")
    p.add_argument("--batch-size", type=int, default=16)
    p.add_argument("--device", default="auto", help="auto (a GPU when there is one) | cpu | cuda")
    p.add_argument("--precision", default="auto", help="auto (bfloat16 only where native) | float32 | bfloat16")
    p.add_argument("--no-progress", action="store_true")
    p.add_argument("--ids", choices=("names", "positions"), default="names",
                   help="image ids in --out: names (the file names' trailing digits, as COCO's; names with and "
                        "without them are refused) | positions (0..n-1 in the order captioned)")
    return p


def main(argv: list[str] | None = None) -> int:
    a = parser().parse_args(argv)
    from capaware.captioner import ImageCaptioner  # after parsing: --help without importing torch
    from eval.attention_maps import plot_attention

    paths = collect(a.images)
    captioner = ImageCaptioner.load(a.model, a.device, a.precision)
    if captioner.file.provenance.get("synthetic_data"):
        print(f"note: this model learned from {captioner.file.provenance['synthetic_data']}", file=sys.stderr)
    numbers = folder_ids(paths, "pass --ids positions").tolist() if a.ids == "names" else range(len(paths))
    ids = dict(zip(map(str, paths), numbers))
    done, skipped = [], []
    start = time.perf_counter()
    for k, c in enumerate(captioner.run(paths, a.beam, a.batch_size, attention=bool(a.attention),
                                        skip_bad=a.skip_bad, progress=not a.no_progress and len(paths) > 1)):
        if c.error:
            skipped.append(c)
            continue
        print(f"{c.source}\t{c.caption}", flush=True)
        done.append(c)
        if a.attention:
            plot_attention(c.image, c.caption.split(), c.attention, captioner.grid,
                           Path(a.attention) / f"{k:05d}_{Path(c.source).stem}.png", c.caption)
    seconds = time.perf_counter() - start
    if a.out:
        rows = [{"image_id": ids[c.source], "file_name": c.source, "caption": c.caption} for c in done]
        write_text(a.out, "[\n" + ",\n".join(json.dumps(r) for r in rows) + "\n]\n")
    where = f"{captioner.device.type}, {captioner.extract.precision}"
    print(f"caption: {len(done)} images in {seconds:.1f} s ({len(done) / max(seconds, 1e-9):.1f} images/s, {where})"
          + (f" -> {a.out}" if a.out else ""), file=sys.stderr)
    if skipped:
        print(f"skipped {len(skipped)} file(s):", file=sys.stderr)
        for c in skipped:
            print(f"  {c.source}: {c.error}", file=sys.stderr)
    return 1 if skipped else 0
