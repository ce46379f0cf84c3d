"""embedder.jitter: zoom-and-shift crops, reproducible per (seed, step), never flipped."""
import pytest
import torch

from capcore.errors import CapawareError
from embedder.config import load_config
from embedder.jitter import jitter


def ramp(b=6, h=32, w=32):
    """Every image rises left to right and top to bottom: a flip would reverse one of the two."""
    x = torch.linspace(0, 1, w)[None, :] + 2 * torch.linspace(0, 1, h)[:, None]
    return x.expand(b, 3, h, w).contiguous()


def test_jitter_is_a_zoom_and_shift_reproducible_per_step_and_never_a_flip():
    x = ramp()
    assert jitter(x, 0.0, seed=0, step=5) is x
    a, b = jitter(x, 0.4, seed=0, step=5), jitter(x, 0.4, seed=0, step=5)
    assert torch.equal(a, b) and not torch.equal(a, jitter(x, 0.4, seed=0, step=6))
    assert a.shape == x.shape and not torch.allclose(a, x)
    assert (a[..., :, 1:] >= a[..., :, :-1] - 1e-6).all() and (a[..., 1:, :] >= a[..., :-1, :] - 1e-6).all()
    # a zoom in stays inside the image: the values stay within the image's own range, and the slope grows
    assert a.min() >= x.min() - 1e-6 and a.max() <= x.max() + 1e-6
    slope = (a[..., :, -1] - a[..., :, 0]).mean()
    assert slope < (x[..., :, -1] - x[..., :, 0]).mean() + 1e-6  # a crop spans less of the ramp


def test_constant_images_are_unchanged():
    x = torch.full((3, 3, 16, 16), 0.25)
    torch.testing.assert_close(jitter(x, 0.5, seed=1, step=0), x)


def test_jitter_on_frozen_maps_is_refused_in_one_line():
    with pytest.raises(CapawareError, match="train.jitter.*freeze"):
        load_config("configs/demo/demo_caption.yaml", ["train.jitter=0.2"])
    assert load_config("configs/demo/demo_caption.yaml", ["train.jitter=0.2", "train.freeze=none"]).train.jitter == 0.2
