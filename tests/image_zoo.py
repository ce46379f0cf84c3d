"""What a folder of one's own photos holds: one file of each kind that ``capdata.images.load_rgb`` must
open correctly (``good_images``) or refuse in one line (``bad_images``). Shared by tests/capdata/test_images.py
and tests/capaware/test_capaware_cli.py."""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
from PIL import Image

RED, BLUE = (220, 30, 30), (30, 30, 220)


def halves(w: int = 40, h: int = 20) -> Image.Image:
    """Left half red, right half blue: which way up it is shows in its pixels."""
    a = np.zeros((h, w, 3), np.uint8)
    a[:, : w // 2], a[:, w // 2:] = RED, BLUE
    return Image.fromarray(a)


def exif_rotated(path: Path) -> Path:
    """A JPEG stored sideways with EXIF orientation 6 (display rotated 90 degrees clockwise), as phones write."""
    exif = Image.Exif()
    exif[0x0112] = 6
    halves().save(path, quality=95, exif=exif)
    return path


def good_images(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {"exif_rotated": exif_rotated(folder / "phone.jpg")}
    cmyk = Image.new("CMYK", (16, 12), (255, 0, 0, 0))  # pure cyan ink
    cmyk.save(out.setdefault("cmyk", folder / "print_cmyk.jpg"), quality=95)
    wide = np.tile(np.linspace(0, 65535, 32).astype(np.uint16), (8, 1))  # 16-bit grey ramp
    Image.fromarray(wide).save(out.setdefault("grey16", folder / "scan16.png"))
    Image.new("L", (16, 12), 90).save(out.setdefault("grey", folder / "grey.png"))
    pal = Image.new("P", (16, 12), 1)
    pal.putpalette([0, 0, 0, 200, 10, 10] + [0] * 762)
    pal.paste(0, (0, 0, 8, 12))  # left half: palette entry 0, transparent
    pal.save(out.setdefault("palette_alpha", folder / "logo.png"), transparency=0)
    frames = [Image.new("RGB", (16, 12), RED), Image.new("RGB", (16, 12), BLUE)]
    frames[0].save(out.setdefault("animated", folder / "anim.gif"), save_all=True, append_images=frames[1:],
                   duration=100, loop=0)
    return out


def bad_images(folder: Path) -> dict[str, Path]:
    folder.mkdir(parents=True, exist_ok=True)
    out = {"empty": folder / "empty.jpg", "not_image": folder / "notes.jpg", "truncated": folder / "cut.jpg"}
    out["empty"].write_bytes(b"")
    out["not_image"].write_text("shopping list: milk, eggs\n")
    buf = io.BytesIO()
    Image.fromarray(np.random.default_rng(0).integers(0, 255, (64, 64, 3), dtype=np.uint8)).save(buf, "JPEG")
    out["truncated"].write_bytes(buf.getvalue()[: len(buf.getvalue()) // 2])
    return out
