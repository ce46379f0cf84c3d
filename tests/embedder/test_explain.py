"""embedder/explain.py (issue #67, Gordo & Larlus §6.3): each image's cell shares sum to the pair's cosine in the
model's own embedding (F.cosine_similarity of the forward pass), so do the cell pairs, and a cell that holds what the
two images share carries the largest share; a backbone that pools its own way is one line."""
import pytest
import torch
import torch.nn.functional as F

from capcore.errors import CapawareError
from embedder.explain import explain_pair
from embedder.model import Embedder


def test_the_shares_sum_to_the_cosine_and_the_shared_cell_leads():
    torch.manual_seed(0)
    model = Embedder("resnet10", 16).eval()
    a, b = torch.rand(3, 96, 96) * 0.1, torch.rand(3, 96, 96) * 0.1
    a[:, :32, :32] = b[:, 64:, 64:] = torch.tensor([1.0, 0.0, 0.0])[:, None, None]  # the same red patch
    got = explain_pair(model, a, b)
    want = F.cosine_similarity(model(a[None]), model(b[None])).item()
    assert got.cosine == pytest.approx(want, abs=1e-5)
    assert got.cells_a.sum().item() == pytest.approx(want, abs=1e-5)
    assert got.cells_b.sum().item() == pytest.approx(want, abs=1e-5)
    assert got.pairs.sum().item() == pytest.approx(want, abs=1e-5) and got.cells_a.shape == (3, 3)


class MapModel(torch.nn.Module):
    """A trunk whose last map is given (the image tensor itself) under an identity head: the shares then say where
    the images' maps agree, which a random ResNet's receptive fields would blur."""

    def __init__(self, channels: int):
        super().__init__()
        self.head = torch.nn.Linear(channels, channels)
        with torch.no_grad():
            self.head.weight.copy_(torch.eye(channels))
            self.head.bias.zero_()

    def features_and_vector(self, x):
        return x, None


def test_the_cell_that_holds_what_both_images_share_carries_the_largest_share():
    g = torch.Generator().manual_seed(1)
    a, b = torch.rand(8, 3, 3, generator=g) * 0.1, torch.rand(8, 3, 3, generator=g) * 0.1
    a[0, 0, 0] = b[0, 2, 2] = 3.0  # one shared feature: a's top-left cell, b's bottom-right one
    got = explain_pair(MapModel(8), a, b)
    assert torch.argmax(got.cells_a).item() == 0 and torch.argmax(got.cells_b).item() == 8
    assert torch.argmax(got.pairs).item() == 0 * 9 + 8
    assert got.cells_a.sum().item() == pytest.approx(F.cosine_similarity(a.mean((1, 2)), b.mean((1, 2)), 0).item())


def test_a_backbone_with_its_own_pooling_is_one_line():
    model = Embedder("resnet10", 8)
    model.features_and_vector = lambda x: (torch.zeros(1, 512, 2, 2), torch.zeros(1, 512))
    with pytest.raises(CapawareError, match="pools its own way"):
        explain_pair(model, torch.rand(3, 64, 64), torch.rand(3, 64, 64))
