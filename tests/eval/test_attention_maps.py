"""eval.attention_maps draws each word's attention where the captioner looked: the overlay of a map that puts
all weight on one grid cell is hottest (jet's red end) inside that cell and cold (its blue end) far from it."""
from __future__ import annotations

import numpy as np
from matplotlib import colormaps
from PIL import Image

from eval.attention_maps import PANEL, heat_overlay, plot_attention


def test_one_hot_attention_is_red_in_its_cell_and_blue_far_away():
    grey = Image.new("RGB", (80, 40), (128, 128, 128))
    amap = np.zeros((2, 4), np.float32)
    amap[0, 3] = 0.7  # top row, last column: the top-right 20 x 20 block of the image
    overlay = np.asarray(heat_overlay(grey, amap), np.float32)
    expected_hot = 0.5 * np.array(colormaps["jet"](1.0)[:3]) * 255 + 0.5 * 128
    expected_cold = 0.5 * np.array(colormaps["jet"](0.0)[:3]) * 255 + 0.5 * 128
    assert np.allclose(overlay[5, 75], expected_hot, atol=12)  # the cell's own corner
    assert np.allclose(overlay[35, 5], expected_cold, atol=2)  # the opposite corner
    red_minus_blue = overlay[..., 0] - overlay[..., 2]
    row, col = np.unravel_index(red_minus_blue.argmax(), red_minus_blue.shape)
    assert row < 20 and col >= 60


def test_one_panel_per_word_plus_the_image(tmp_path):
    image = Image.new("RGB", (64, 32), (200, 180, 160))
    words = ["a", "red", "star", "here"]
    alpha = np.full((4, 4), 0.25, np.float32)
    out = plot_attention(image, words, alpha, (2, 2), tmp_path / "att.png", title="1: a red star here", cols=3)
    sheet = Image.open(out)
    assert sheet.width > 3 * PANEL and sheet.height > 2 * (PANEL // 2)  # 5 panels in 3 columns: two rows
    assert [p.name for p in tmp_path.iterdir()] == ["att.png"]  # written in one step, nothing half-written left
