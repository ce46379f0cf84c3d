"""A backbone's stages come from its entry (issue #57): timm's own coarse groups, torchvision's blocks, a ResNet's
layers. ``train.layer_lr`` and ``train.freeze`` read them: every parameter in one stage, input to output, a frozen
stage never stepped and its BatchNorm statistics held, a name the backbone lacks one line naming its own."""
import pytest
import torch

from capcore.errors import CapawareError
from embedder.backbones import backbone, stage_names
from embedder.config import load_config
from embedder.model import Embedder, hold_frozen_norms
from embedder.param_groups import param_groups

timm = pytest.importorskip("timm")


def stages_of(name: str) -> tuple[torch.nn.Module, dict[str, list]]:
    with torch.device("meta"):
        trunk = backbone(name).build()
    return trunk, trunk.stage_parameters()


def stage_of(stages: dict[str, list], param) -> str:
    return next(name for name, params in stages.items() if any(p is param for p in params))


@pytest.mark.parametrize("name", ["timm:vit_tiny_patch16_224", "timm:convnext_atto", "timm:efficientnet_b0",
                                  "torchvision:resnet18", "torchvision:convnext_tiny", "torchvision:vit_b_16"])
def test_every_parameter_is_in_exactly_one_stage(name):
    trunk, stages = stages_of(name)
    ids = [id(p) for params in stages.values() for p in params]
    assert len(ids) == len(set(ids)) and set(ids) == {id(p) for p in trunk.parameters()}
    assert list(stages)[0] == "stem" and len(stages) >= 4 and all(stages.values())
    assert stage_names(name) == list(stages)


def test_a_timm_vit_runs_from_its_patch_projection_through_its_blocks_in_order():
    """timm's own groups (group_matcher, as its layer-wise decay reads them): the patch projection and position
    table first, block i in stage i, the final norm last."""
    trunk, stages = stages_of("timm:vit_tiny_patch16_224")
    net = trunk.net
    assert stage_of(stages, net.patch_embed.proj.weight) == stage_of(stages, net.pos_embed) == "stem"
    order = [stage_of(stages, block.attn.qkv.weight) for block in net.blocks]
    assert order == [f"stage{i}" for i in range(1, len(net.blocks) + 1)]
    assert list(stages).index(stage_of(stages, net.norm.weight)) == len(stages) - 1


def test_torchvision_stages_follow_its_blocks_and_the_unused_classifier_joins_the_last():
    trunk, stages = stages_of("torchvision:resnet18")
    net = trunk.net
    assert list(stages) == ["stem", "layer1", "layer2", "layer3", "layer4"]
    assert stage_of(stages, net.conv1.weight) == "stem" and stage_of(stages, net.layer3[0].conv1.weight) == "layer3"
    assert stage_of(stages, net.fc.weight) == "layer4"
    trunk, stages = stages_of("torchvision:convnext_tiny")
    assert len(stages) == len(trunk.net.features)  # one per child of features: stem, then stages and downsamplings


def vit(seed: int = 0) -> Embedder:
    torch.manual_seed(seed)
    return Embedder("timm:vit_tiny_patch16_224", embed_dim=8)


def test_layer_lr_scales_a_vit_stage_and_every_parameter_is_in_one_group():
    model, loss = vit(), torch.nn.Linear(2, 2)
    groups = param_groups(model, loss, 1e-4, {"stage3": 2.0, "head": 0.5})
    rates = {g["name"]: g["lr"] for g in groups}
    assert rates["stage3"] == pytest.approx(2e-4) and rates["head"] == pytest.approx(5e-5)
    assert rates["stem"] == rates["stage2"] == pytest.approx(1e-4)
    ids = [id(p) for g in groups for p in g["params"]]
    assert sorted(ids) == sorted({id(p) for p in list(model.parameters()) + list(loss.parameters())})


def test_a_vit_frozen_in_place_never_steps_its_frozen_stages():
    model = vit()
    prefix, rest = model.split_trunk("stage2")
    assert len(prefix) == 0 and rest is model.trunk  # not a plain sequence: frozen in place, run every step
    groups = param_groups(model, torch.nn.Identity(), 1e-2, {})
    assert [g["name"] for g in groups][:2] == ["stage3", "stage4"]
    before = {k: v.clone() for k, v in model.state_dict().items()}
    opt = torch.optim.Adam([p for g in groups for p in g["params"]], lr=1e-2)
    model.head(rest(torch.rand(2, 3, 32, 32))).square().mean().backward()
    opt.step()
    after = model.state_dict()
    changed = {k for k in before if not torch.equal(before[k], after[k])}
    assert not any(k.startswith(("trunk.net.patch_embed", "trunk.net.blocks.0.", "trunk.net.blocks.1."))
                   for k in changed)
    assert any(k.startswith("trunk.net.blocks.2.") for k in changed) and "head.weight" in changed


def test_a_stage_frozen_in_place_keeps_its_batchnorm_statistics():
    torch.manual_seed(0)
    model = Embedder("torchvision:resnet18", embed_dim=8)
    model.split_trunk("layer1")
    model.train()
    hold_frozen_norms(model)
    net = model.trunk.net
    frozen, trained = net.layer1[0].bn1.running_mean.clone(), net.layer2[0].bn1.running_mean.clone()
    model(torch.rand(4, 3, 32, 32))
    assert torch.equal(net.layer1[0].bn1.running_mean, frozen) and not net.layer1[0].bn1.training
    assert not torch.equal(net.layer2[0].bn1.running_mean, trained)


@pytest.mark.parametrize("override, match", [
    ("train.freeze=layer2", r"train.freeze: timm:convnext_atto has no stage 'layer2'.*use one of none, stem, stage1"),
    ("train.layer_lr.layer4=2", r"train.layer_lr: timm:convnext_atto has no stage layer4.*stem, stage1"),
])
def test_a_stage_the_backbone_lacks_is_one_line_naming_its_own(override, match):
    with pytest.raises(CapawareError, match=match):
        load_config("configs/demo/demo_caption.yaml", ["model.arch=timm:convnext_atto", "train.freeze=none", override])


def test_a_config_may_freeze_and_scale_the_backbones_own_stages():
    cfg = load_config("configs/demo/demo_caption.yaml",
                      ["model.arch=timm:convnext_atto", "train.freeze=stage1", "train.layer_lr.stage4=3"])
    assert cfg.train.freeze == "stage1" and cfg.train.layer_lr["stage4"] == 3
