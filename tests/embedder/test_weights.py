"""One loader of pretrained weight files for both stages (issue #65): stage one's ``model.init: imagenet`` and stage
two's ``backbone.checkpoint: imagenet`` go through ``embedder.weights.load_pretrained``, a ResNet as any other
backbone. A DistributedDataParallel file (every key under ``module.``) loads into both alike, with a one-line note; a
file of another depth, or with one layer renamed, is refused by both in one line naming the file and the counts."""
from __future__ import annotations

import pytest
import torch
import torchvision

import embedder.model
import embedder.weights
import feature_extract.backbone
from capcore.errors import CapawareError
from embedder.model import build_model
from feature_extract.backbone import load_backbone
from feature_extract.config import BackboneConfig


def saved(path, state: dict):
    torch.save(state, path)
    return path


def stage_one(arch: str, path):
    return build_model(arch, 8, "imagenet", str(path)).trunk


def stage_two(arch: str, path):
    model, _ = load_backbone(BackboneConfig(checkpoint="imagenet", arch=arch, weights=str(path)))
    return getattr(model, "trunk", model)


STAGES = {"stage one": stage_one, "stage two": stage_two}


@pytest.fixture(scope="module")
def resnet18_state():
    torch.manual_seed(0)
    return torchvision.models.resnet18(weights=None).state_dict()


def test_both_stages_call_the_one_loader():
    assert embedder.model.load_pretrained is feature_extract.backbone.load_pretrained is \
        embedder.weights.load_pretrained


@pytest.mark.parametrize("stage", STAGES)
def test_a_distributed_data_parallel_file_loads_with_a_note(tmp_path, capsys, resnet18_state, stage):
    path = saved(tmp_path / "ddp_resnet18.pth", {f"module.{k}": v for k, v in resnet18_state.items()})
    trunk = STAGES[stage]("resnet18", path)
    got = trunk.state_dict()
    assert set(got) == {k for k in resnet18_state if not k.startswith("fc.")}
    assert all(torch.equal(got[k], resnet18_state[k]) for k in got)
    err = capsys.readouterr().err
    assert f"note: {path}: stripped the 'module.' prefix (a DistributedDataParallel save)" in err


def test_a_prefixed_file_of_another_backbone_loads_alike_in_both_stages(tmp_path, capsys):
    timm = pytest.importorskip("timm")
    torch.manual_seed(0)
    net = timm.create_model("convnext_atto", pretrained=False)
    path = saved(tmp_path / "ddp_convnext.pth", {f"module.{k}": v for k, v in net.state_dict().items()})
    one, two = stage_one("timm:convnext_atto", path), stage_two("timm:convnext_atto", path)
    for trunk in (one, two):
        got = trunk.net.state_dict()
        assert all(torch.equal(got[k], net.state_dict()[k]) for k in got)
    assert capsys.readouterr().err.count("stripped the 'module.' prefix") == 2


@pytest.mark.parametrize("stage", STAGES)
def test_a_file_of_another_depth_is_refused_with_its_counts(tmp_path, stage):
    torch.manual_seed(0)
    deeper = torchvision.models.resnet34(weights=None).state_dict()
    path = saved(tmp_path / "resnet34-file.pth", deeper)
    with torch.device("meta"):
        shallow = set(torchvision.models.resnet18(weights=None).state_dict())
    extra = len([k for k in deeper if k not in shallow and not k.startswith("fc.")])
    with pytest.raises(CapawareError) as err:
        STAGES[stage]("resnet18", path)
    assert err.value.where == str(path) and extra > 0
    assert f"tensors do not fit resnet18 (0 missing, {extra} unexpected" in err.value.problem
    key = "model" if stage == "stage one" else "backbone"
    assert f"set {key}.arch to the model resnet34-file.pth holds (not resnet18)" in err.value.fix


@pytest.mark.parametrize("stage", STAGES)
def test_a_file_with_one_layer_renamed_is_refused_naming_the_file(tmp_path, resnet18_state, stage):
    renamed = {k.replace("layer2.0.conv1.", "layer2.0.conv_a."): v for k, v in resnet18_state.items()}
    path = saved(tmp_path / "renamed.pth", renamed)
    with pytest.raises(CapawareError) as err:
        STAGES[stage]("resnet18", path)
    line = str(err.value)
    assert line.startswith(f"{path}: tensors do not fit resnet18 (1 missing, 1 unexpected; ") and "\n" not in line
    assert "missing layer2.0.conv1.weight, unexpected layer2.0.conv_a.weight" in line


def test_a_file_under_another_prefix_is_refused_with_the_way_out(tmp_path, resnet18_state):
    path = saved(tmp_path / "wrapped.pth", {f"backbone.{k}": v for k, v in resnet18_state.items()})
    n = len([k for k in resnet18_state if not k.startswith("fc.") and not k.endswith("num_batches_tracked")])
    with pytest.raises(CapawareError) as err:
        stage_two("resnet18", path)
    assert f"({n} missing, {len(resnet18_state)} unexpected" in err.value.problem
    assert "its tensors are under 'backbone.'" in err.value.fix


def test_a_plugin_trunk_loads_its_own_state_dict_or_its_wrapped_models(tmp_path):
    """A GridTrunk that keeps its layers in ``self.net``: the file ``torch.save(trunk.state_dict())`` writes (names
    ``net.0.weight``) loads, and so does the wrapped model's own (``0.weight``), as a timm or torchvision file does."""
    from embedder.grid_trunk import GridTrunk
    from embedder.weights import load_weights

    class Plugin(GridTrunk):
        width = 4

        def __init__(self):
            super().__init__()
            self.net = torch.nn.Sequential(torch.nn.Conv2d(3, 4, 2), torch.nn.ReLU(), torch.nn.Conv2d(4, 4, 1))

        def features_and_vector(self, x):
            return self.net(x), None

    torch.manual_seed(0)
    source = Plugin()
    own, inner = saved(tmp_path / "own.pt", source.state_dict()), saved(tmp_path / "inner.pt", source.net.state_dict())
    for path in (own, inner):
        trunk = Plugin()
        load_weights(trunk, path, "plugin")
        assert all(torch.equal(a, b) for a, b in zip(trunk.state_dict().values(), source.state_dict().values()))
    assert list(torch.load(own, weights_only=True)) == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]
