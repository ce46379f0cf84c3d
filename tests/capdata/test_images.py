"""capdata.images.load_rgb on what a folder of one's own photos holds: each kind opened upright as the
8-bit RGB a viewer shows, or refused in one line naming the file."""
from __future__ import annotations

import numpy as np
import pytest
from PIL import Image

from capcore.errors import CapawareError
from capdata import images
from capdata.images import load_rgb
from tests.image_zoo import BLUE, RED, bad_images, good_images


@pytest.fixture(scope="module")
def zoo(tmp_path_factory):
    return good_images(tmp_path_factory.mktemp("zoo"))


def close(pixel, colour, tol=12) -> bool:
    return all(abs(int(p) - int(c)) <= tol for p, c in zip(pixel, colour))


def test_exif_orientation_is_applied(zoo):
    img = load_rgb(zoo["exif_rotated"])
    assert img.size == (20, 40)  # stored 40 x 20, shown turned 90 degrees clockwise
    # clockwise: the stored left (red) half becomes the top, the right (blue) half the bottom
    assert close(img.getpixel((10, 5)), RED) and close(img.getpixel((10, 34)), BLUE)
    with Image.open(zoo["exif_rotated"]) as raw:  # PIL alone keeps it sideways
        assert raw.size == (40, 20)


def test_sixteen_bit_grey_is_scaled_not_clipped(zoo):
    a = np.asarray(load_rgb(zoo["grey16"]))
    ramp = np.rint(np.linspace(0, 65535, 32) / 257.0)
    assert a.shape == (8, 32, 3) and np.abs(a[3, :, 0] - ramp).max() <= 1
    assert (a[..., 0] == a[..., 1]).all() and a[0, 16, 0] < 200  # PIL's convert("RGB") gives 255 there


def test_cmyk_grey_palette_alpha_and_animation(zoo):
    assert close(load_rgb(zoo["cmyk"]).getpixel((5, 5)), (0, 255, 255))
    assert load_rgb(zoo["grey"]).getpixel((3, 3)) == (90, 90, 90)
    logo = load_rgb(zoo["palette_alpha"])
    assert logo.getpixel((2, 2)) == (255, 255, 255) and logo.getpixel((12, 2)) == (200, 10, 10)
    anim = load_rgb(zoo["animated"])
    assert anim.mode == "RGB" and close(anim.getpixel((4, 4)), RED)  # the first frame
    assert all(load_rgb(p).mode == "RGB" for p in zoo.values())


@pytest.mark.parametrize("kind, problem", [("empty", "empty file"), ("not_image", "not a known image format"),
                                           ("truncated", "cannot decode image")])
def test_bad_files_are_refused_in_one_line(tmp_path, kind, problem):
    path = bad_images(tmp_path)[kind]
    with pytest.raises(CapawareError, match=problem) as err:
        load_rgb(path)
    assert err.value.where == str(path) and "\n" not in str(err.value)


def test_decompression_bombs_are_refused_before_decoding(tmp_path, monkeypatch):
    path = tmp_path / "big.png"
    Image.new("RGB", (50, 40)).save(path)
    monkeypatch.setattr(images, "MAX_PIXELS", 1999)
    with pytest.raises(CapawareError, match=r"too large .*50 x 40") as err:
        load_rgb(path)
    assert "downscale" in err.value.fix
    monkeypatch.setattr(images, "MAX_PIXELS", 2000)
    assert load_rgb(path).size == (50, 40)
