"""embedder.resnet.ResNetTrunk (issue #65): torchvision's ResNet class with torchvision's layout for each name, so its
tensors are named and shaped as torchvision's model's (a torchvision file and every capaware checkpoint load as they
are), its forward is torchvision's up to the pooled vector, and it has the interface of every backbone of the table."""
import pytest
import torch
import torchvision

from embedder.backbone_constants import IMAGENET_NORM, RESNET_STAGES
from embedder.backbones import RESNETS, backbone
from embedder.grid_trunk import GridTrunk
from embedder.resnet import LAYOUTS, ResNetTrunk


def shapes(module) -> dict[str, tuple]:
    return {k: tuple(v.shape) for k, v in module.state_dict().items()}


@pytest.mark.parametrize("arch", ["resnet18", "resnet34", "resnet50", "resnet101", "resnet152"])
def test_its_tensors_are_torchvisions_minus_the_classifier(arch):
    with torch.device("meta"):
        ours, theirs = ResNetTrunk(arch), getattr(torchvision.models, arch)(weights=None)
    want = {k: v for k, v in shapes(theirs).items() if not k.startswith("fc.")}
    assert list(shapes(ours)) == list(want) and shapes(ours) == want
    assert ours.width == theirs.fc.in_features == RESNETS[arch]


def test_resnet10_is_resnet18_with_one_block_per_stage_and_every_resnet_of_the_table_has_a_layout():
    assert set(LAYOUTS) == set(RESNETS)
    with torch.device("meta"):
        small, large = ResNetTrunk("resnet10"), ResNetTrunk("resnet18")
    keep = {k: v for k, v in shapes(large).items() if not k.startswith(tuple(f"layer{i}.1." for i in range(1, 5)))}
    assert shapes(small) == keep


def test_the_table_builds_it_and_its_forward_is_torchvisions():
    torch.manual_seed(0)
    trunk = backbone("resnet18").build()
    assert isinstance(trunk, ResNetTrunk) and isinstance(trunk, GridTrunk) and trunk.norm == IMAGENET_NORM
    assert list(trunk.stage_parameters()) == list(RESNET_STAGES)
    reference = torchvision.models.resnet18(weights=None)
    reference.load_state_dict(trunk.state_dict(), strict=False)
    reference.fc = torch.nn.Identity()
    trunk.eval()
    reference.eval()
    x = torch.rand(2, 3, 64, 64)
    with torch.no_grad():
        grid, vector = trunk.features_and_vector(x)
        assert vector is None and grid.shape == (2, 512, 2, 2)
        assert torch.equal(trunk(x), reference(x)) and torch.allclose(grid.mean((2, 3)), trunk(x), atol=1e-6)
    ids = [id(p) for ps in trunk.stage_parameters().values() for p in ps]
    assert sorted(ids) == sorted(id(p) for p in trunk.parameters())
