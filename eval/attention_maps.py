"""Where the captioner looked, per word (the paper's Fig. 16):
``python -m eval.attention_maps --attention att.h5 --refs dataset_coco.json --out DIR [--image-ids ID ...]``.

Reads the attention file written by ``captioners.predict --attention`` (image_id, seq, alpha [N, T, H*W],
caption; attrs grid_h, grid_w) and the Karpathy json for the image files. Writes one PNG per image,
``DIR/attention_<image_id>.png``: the image with its caption, then one panel per word with that word's
attention (reshaped to the H x W grid, upsampled bilinearly to the image) over the image. Each panel
is scaled to its own maximum, as in Fig. 16, so the pattern is visible even where attention is flat;
the maximum weight is printed under the word to keep that honest.

The features are assumed to cover the whole image (square resize; a centre crop would shift the map).
"""
from __future__ import annotations

import argparse
import math
from pathlib import Path

import h5py
import numpy as np
from PIL import Image

from capcore.atomic import atomic_path
from capcore.errors import CapawareError, run_cli
from capdata.captions import image_files, read_captions


def read_attention(path: str | Path) -> dict:
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "attention file not found",
                            "write it with python -m captioners.predict ... --attention FILE.h5")
    with h5py.File(path, "r") as f:
        missing = [k for k in ("image_id", "alpha", "caption") if k not in f]
        if missing:
            raise CapawareError(path, f"no dataset(s) {missing}", "rewrite it with captioners.predict --attention")
        return {"image_id": f["image_id"][:].astype(np.int64), "alpha": f["alpha"][:].astype(np.float32),
                "caption": [c.decode() if isinstance(c, bytes) else str(c) for c in f["caption"][:]],
                "grid": (int(f.attrs["grid_h"]), int(f.attrs["grid_w"]))}


def image_paths(refs: str | Path, image_root: str | Path | None = None, fmt: str | None = None) -> dict[int, Path]:
    """Image files by image id of the caption file the captions were made for (any caption format)."""
    return image_files(read_captions(refs, fmt, image_root))


PANEL = 160
"""Width of one panel in pixels; the image keeps its aspect ratio."""


def heat_overlay(image: Image.Image, amap: np.ndarray, opacity: float = 0.5) -> Image.Image:
    """The image with one word's attention over it: the H x W map scaled to its own maximum, upsampled
    bilinearly to the image and coloured with matplotlib's ``jet``, blended at ``opacity``."""
    from matplotlib import colormaps  # the colormap alone: pyplot's figures cost seconds per picture

    w, h = image.size
    scaled = (amap / max(float(amap.max()), 1e-12)).astype(np.float32)
    up = np.asarray(Image.fromarray(scaled).resize((w, h), Image.BILINEAR)).clip(0.0, 1.0)
    heat = (colormaps["jet"](up)[..., :3] * 255).astype(np.uint8)
    return Image.blend(image, Image.fromarray(heat), opacity)


def plot_attention(image: Image.Image, words: list[str], alpha: np.ndarray, grid: tuple[int, int], out: Path,
                   title: str = "", cols: int = 5) -> Path:
    """One PNG: the image, then one heat-map panel per word (the word above it, its peak weight below).
    ``alpha`` is [len(words), H*W]. Drawn with PIL: a matplotlib figure of 17 panels took half a second."""
    from PIL import ImageDraw, ImageFont

    image = image.convert("RGB")
    size = (PANEL, max(1, round(PANEL * image.height / image.width)))
    base = image.resize(size, Image.BILINEAR)
    panels = [("image", "", base)] + [(word, f"max {float(alpha[k].max()):.2f}",
                                       heat_overlay(base, alpha[k].reshape(grid))) for k, word in enumerate(words)]
    cols = min(cols, len(panels))
    rows = math.ceil(len(panels) / cols)
    font, small = ImageFont.load_default(size=14), ImageFont.load_default(size=10)
    pad, top, cell_h = 8, (28 if title else 6), size[1] + 40
    sheet = Image.new("RGB", (cols * (PANEL + pad) + pad, top + rows * cell_h), "white")
    draw = ImageDraw.Draw(sheet)
    if title:
        draw.text((sheet.width // 2, 6), title, fill="black", font=font, anchor="ma")
    for k, (word, note, picture) in enumerate(panels):
        x, y = pad + (k % cols) * (PANEL + pad), top + (k // cols) * cell_h
        draw.text((x + PANEL // 2, y), word, fill="black", font=font, anchor="ma")
        sheet.paste(picture, (x, y + 20))
        draw.text((x + PANEL // 2, y + 22 + size[1]), note, fill="dimgray", font=small, anchor="ma")
    out.parent.mkdir(parents=True, exist_ok=True)
    with atomic_path(out) as tmp:
        sheet.save(tmp, format="PNG")
    return out


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--attention", required=True, help="the .h5 written by captioners.predict --attention")
    parser.add_argument("--refs", required=True, help="Karpathy dataset_*.json (to find the image files)")
    parser.add_argument("--image-root", default=None, help="image folder when it is not next to the json")
    parser.add_argument("--format", default=None, help="the caption format of --refs [found from the file]")
    parser.add_argument("--out", required=True, help="folder for the PNGs")
    parser.add_argument("--image-ids", type=int, nargs="*", default=None,
                        help="images to draw (default: the first --n)")
    parser.add_argument("--n", type=int, default=4)
    parser.add_argument("--cols", type=int, default=5)
    a = parser.parse_args(argv)
    att = read_attention(a.attention)
    paths = image_paths(a.refs, a.image_root, a.format)
    row_of = {int(i): r for r, i in enumerate(att["image_id"])}
    ids = a.image_ids if a.image_ids else [int(i) for i in att["image_id"][:a.n]]
    missing = [i for i in ids if i not in row_of]
    if missing:
        raise CapawareError(a.attention, f"no attention for image ids {missing[:5]}", "decode those images first")
    written = []
    for image_id in ids:
        r = row_of[image_id]
        path = paths.get(image_id)
        if path is None or not path.is_file():
            raise CapawareError(path or a.refs, f"image file of id {image_id} not found", "pass --image-root")
        words = att["caption"][r].split()
        written.append(plot_attention(Image.open(path), words, att["alpha"][r][:len(words)], att["grid"],
                                      Path(a.out) / f"attention_{image_id}.png", f"{image_id}: {att['caption'][r]}",
                                      a.cols))
    print(f"attention maps: {len(written)} images -> {a.out}")


if __name__ == "__main__":
    run_cli(main)
