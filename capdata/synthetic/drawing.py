"""The small drawing and writing helpers the three generators share: per-image random streams, argument
checks, anti-aliased downsampling, atomic image and JSON writes, noise and gradients.

They live apart from the package's ``__init__`` so that the generators import them without importing
the package that imports the generators (no import cycle).
"""
from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
from PIL import Image

from capcore.atomic import atomic_path
from capcore.errors import CapawareError

KIND_IDS = {"poses": 1, "rooms": 2, "captions": 3, "unlabeled": 4}  # unlabeled: caption-world scenes without captions
SUPERSAMPLE = 2
"""Images are drawn at this multiple of the output size and box-filtered down: cheap anti-aliasing."""


def item_rng(seed: int, kind: str, index: int) -> np.random.Generator:
    """Independent stream per image, so image i does not depend on how many came before it."""
    return np.random.default_rng([int(seed), KIND_IDS[kind], int(index)])


def check_args(where: str, *, seed: int, size: int, min_size: int, **counts: int | None) -> None:
    """Reject impossible arguments up front with a message that names the flag."""
    if not isinstance(seed, (int, np.integer)) or seed < 0:
        raise CapawareError(where, f"seed must be a non-negative integer, got {seed!r}", "pass --seed 0 or larger")
    if not isinstance(size, (int, np.integer)) or size < min_size:
        raise CapawareError(where, f"image size must be an integer >= {min_size} px, got {size!r}",
                            f"pass --size {min_size} or larger")
    for name, value in counts.items():
        if value is None:
            continue
        low = 1 if name == "n_train" else 0
        if not isinstance(value, (int, np.integer)) or value < low:
            flag = "--" + name.replace("_", "-")
            raise CapawareError(where, f"{name} must be an integer >= {low}, got {value!r}",
                                f"pass {flag} {max(low, 1)} or more")


def downsample(img: Image.Image, size: int) -> Image.Image:
    return img.resize((size, size), Image.Resampling.BOX)


def save_image(img: Image.Image, path: Path, **options) -> None:
    """Encode in memory, then write atomically: a killed run leaves no truncated image."""
    buf = io.BytesIO()
    fmt = "JPEG" if path.suffix.lower() in (".jpg", ".jpeg") else "PNG"
    img.save(buf, format=fmt, **options)
    write_bytes(path, buf.getvalue())


def write_bytes(path: Path, data: bytes) -> None:
    with atomic_path(path) as tmp:
        tmp.write_bytes(data)


SHAPES_WORLD = ("capaware's synthetic shapes world (the embedded default: coloured shapes on textures); a captioner "
                "trained on it names shapes and colours, not what a photograph shows")


def write_json(path: Path, obj) -> None:
    """Compact, key order as built: the same object gives the same bytes."""
    write_bytes(path, (json.dumps(obj, separators=(",", ":"), ensure_ascii=True) + "\n").encode("ascii"))


def value_noise(rng: np.random.Generator, height: int, width: int, cells: int) -> np.ndarray:
    """Smooth noise in [0, 1] [H, W]: a coarse random grid upsampled bicubically (vectorised, no loops)."""
    grid = rng.random((cells, cells)).astype(np.float32)
    out = np.asarray(Image.fromarray(grid, mode="F").resize((width, height), Image.Resampling.BICUBIC))
    return np.clip(out, 0.0, 1.0)


def gradient(rng: np.random.Generator, height: int, width: int) -> np.ndarray:
    """A linear ramp in [0, 1] [H, W] along a random direction."""
    angle = rng.uniform(0, 2 * np.pi)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float32)
    ramp = np.cos(angle) * xx / max(width - 1, 1) + np.sin(angle) * yy / max(height - 1, 1)
    ramp -= ramp.min()
    return ramp / max(float(ramp.max()), 1e-6)


def random_colour(rng: np.random.Generator, low: int = 0, high: int = 256) -> tuple[int, int, int]:
    return tuple(int(c) for c in rng.integers(low, high, size=3))


def to_uint8(arr: np.ndarray) -> np.ndarray:
    return np.clip(np.rint(arr), 0, 255).astype(np.uint8)
