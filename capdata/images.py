"""Open images (from annotation files or a user's folder) as upright 8-bit RGB, with errors a user can act on.

A dataset of 100k images always holds a few missing or truncated files, and a folder of one's own
photos holds everything a camera or an editor writes. PIL's own exceptions name neither the file nor
what to do, a lazily decoded image fails far from where it was opened, and ``Image.convert("RGB")``
alone gets several common files wrong: it clips 16-bit PNGs to white, drops an alpha channel onto
whatever colour the transparent pixels happen to hold, and ignores the EXIF orientation a phone
writes instead of rotating its pixels. ``load_rgb`` handles each of these the same way for training,
feature dumps and ``capaware caption``, so a photo gets the features the captioner was trained on.
It decodes fully and closes the file at once, so a worker never holds 100k handles.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

import numpy as np
from PIL import Image, ImageOps, UnidentifiedImageError

from capcore.errors import CapawareError

_FIX = "fix or replace the file, or remove its entry from the annotation file"
# PIL's own decompression-bomb threshold (it warns above it and refuses twice as much): a header that
# claims more pixels is refused before a byte of pixel data is decoded
MAX_PIXELS = Image.MAX_IMAGE_PIXELS or 89_478_485
WIDE_INTEGER_MODES = ("I", "I;16", "I;16B", "I;16L", "I;16N")


def to_rgb(img: Image.Image) -> Image.Image:
    """8-bit RGB of any PIL mode: 16/32-bit integer greys scaled (not clipped) to 0-255, float greys
    clipped, transparency composited onto white (how a viewer shows it), CMYK/palette/grey converted."""
    if img.mode in WIDE_INTEGER_MODES:
        values = np.asarray(img, dtype=np.float64)
        if img.mode != "I" or values.max(initial=0) > 255:  # 16-bit data (PNG greys open as I or I;16)
            values = values / 257.0
        return Image.fromarray(np.clip(np.rint(values), 0, 255).astype(np.uint8)).convert("RGB")
    if img.mode == "F":
        return Image.fromarray(np.clip(np.rint(np.asarray(img)), 0, 255).astype(np.uint8)).convert("RGB")
    if img.mode in ("RGBA", "LA", "PA", "RGBa", "La") or "transparency" in img.info:
        rgba = img.convert("RGBA")
        white = Image.new("RGBA", rgba.size, (255, 255, 255, 255))
        return Image.alpha_composite(white, rgba).convert("RGB")
    return img.convert("RGB")


def upright_rgb(img: Image.Image) -> Image.Image:
    """An opened image (a file's, or a caller's PIL image) as upright 8-bit RGB: EXIF orientation applied."""
    return to_rgb(ImageOps.exif_transpose(img))


def load_rgb(path: str | Path) -> Image.Image:
    """The image at ``path`` as a fully decoded, upright (EXIF orientation applied) 8-bit RGB PIL image,
    its file already closed; an animated image gives its first frame."""
    path = Path(path)
    try:
        if path.is_file() and path.stat().st_size == 0:
            raise CapawareError(path, "empty file (0 bytes)", _FIX)
        with Image.open(path) as img:
            w, h = img.size
            if w * h > MAX_PIXELS:
                raise CapawareError(path, f"image too large to decode safely ({w} x {h} = {w * h / 1e6:.0f} M "
                                    f"pixels; the limit is {MAX_PIXELS / 1e6:.0f} M, against decompression bombs)",
                                    "downscale it (e.g. to 2000 pixels on the long side)")
            img.load()  # the first frame of an animated GIF / WebP / TIFF
            return upright_rgb(img)
    except FileNotFoundError:
        raise CapawareError(path, "image not found", _FIX) from None
    except IsADirectoryError:
        raise CapawareError(path, "image not found (the path is a folder)", _FIX) from None
    except (OSError, SyntaxError, ValueError, Image.DecompressionBombError) as err:
        # PIL raises UnidentifiedImageError (an OSError) for unknown bytes, OSError for truncated
        # data, SyntaxError/ValueError from some plugins on malformed headers.
        if isinstance(err, UnidentifiedImageError):
            reason = "not a known image format, or corrupt"
        else:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise CapawareError(path, f"cannot decode image ({reason})", _FIX) from None


def check_images_exist(records_or_paths) -> None:
    """Raise a CapawareError naming the first image that is not a file; return None if all exist.

    Readers never stat their images (COCO holds 123k); call this once before a long run instead,
    so a missing file stops the run in its first second rather than hours in.
    """
    paths: Iterable = getattr(records_or_paths, "image_paths", records_or_paths)
    for index, path in enumerate(paths):
        if not Path(path).is_file():
            raise CapawareError(
                path, f"image not found (entry {index} of the annotation)",
                "place the image there, pass the right image_root, or remove the entry",
            )
