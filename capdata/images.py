"""Open the images that annotation files point at, with errors a user can act on.

A dataset of 100k images always holds a few missing or truncated files; PIL's own exceptions name
neither the annotation entry nor what to do, and a lazily decoded image fails far from where it was
opened. ``load_rgb`` decodes fully and closes the file at once, so a worker never holds 100k handles.
"""
from __future__ import annotations

from pathlib import Path
from typing import Iterable

from PIL import Image, UnidentifiedImageError

from capcore.errors import CapawareError

_FIX = "fix or replace the file, or remove its entry from the annotation file"


def load_rgb(path: str | Path) -> Image.Image:
    """The image at ``path`` as a fully decoded RGB PIL image (its file already closed)."""
    path = Path(path)
    try:
        with Image.open(path) as img:
            img.load()
            return img.convert("RGB")
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
