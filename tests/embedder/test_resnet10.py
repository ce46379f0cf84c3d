"""embedder.model.resnet10, the CPU demo's trunk (issue #36)."""
import pytest
import torch

from capcore.errors import CapawareError
from embedder.model import Embedder, build_model


def test_resnet10_keeps_resnet18s_interface_at_half_the_blocks_and_refuses_imagenet():
    """The demo's trunk: the same stem, widths and layer4 map as ResNet-18 (so stage two and the captioners read
    512 channels on the same grid), one block per stage, and a one-line refusal of ImageNet weights."""
    small, large = Embedder("resnet10", 8), Embedder("resnet18", 8)
    x = torch.zeros(2, 3, 128, 128)
    assert small.features(x).shape == large.features(x).shape == (2, 512, 4, 4)
    assert [len(getattr(small.trunk, f"layer{i}")) for i in range(1, 5)] == [1, 1, 1, 1]
    count = lambda m: sum(p.numel() for p in m.trunk.parameters())  # noqa: E731
    assert count(small) < 0.5 * count(large)
    with pytest.raises(CapawareError, match="resnet10 has no ImageNet weights"):
        build_model("resnet10", 8, "imagenet")
