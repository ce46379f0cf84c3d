"""Per-stage learning rates (embedder.param_groups, ``train.layer_lr``): every trainable parameter in one group at
its stage's rate, frozen ones in none, and an unscaled run stepping exactly as one group would."""
import pytest
import torch

from capcore.errors import CapawareError
from capcore.optim import adam
from embedder.config import load_config
from embedder.model import Embedder
from embedder.param_groups import param_groups


def small_model():
    torch.manual_seed(0)
    return Embedder("resnet18", embed_dim=8)


def test_every_trainable_parameter_is_in_one_group_at_its_stage_rate():
    model, loss = small_model(), torch.nn.Linear(2, 2)
    groups = param_groups(model, loss, 1e-4, {"layer4": 3.0, "stem": 0.5})
    rates = {g["name"]: g["lr"] for g in groups}
    assert rates == pytest.approx({"stem": 5e-5, "layer1": 1e-4, "layer2": 1e-4, "layer3": 1e-4, "layer4": 3e-4,
                                   "head": 1e-4})
    ids = [id(p) for g in groups for p in g["params"]]
    assert len(ids) == len(set(ids))
    assert set(ids) == {id(p) for p in list(model.parameters()) + list(loss.parameters())}
    assert {id(p) for p in model.trunk.layer4.parameters()} <= {id(p) for p in groups[4]["params"]}
    assert {id(p) for p in loss.parameters()} <= {id(p) for p in groups[-1]["params"]}


def test_frozen_stages_are_left_out():
    model = small_model()
    prefix, _ = model.split_trunk("layer2")
    prefix.requires_grad_(False)
    names = [g["name"] for g in param_groups(model, torch.nn.Identity(), 1e-3, {})]
    assert names == ["layer3", "layer4", "head"]


def test_unscaled_groups_step_exactly_as_one_group():
    """The demo's runs (no train.layer_lr) keep their weights: Adam over the stage groups equals Adam over one list."""
    x = torch.randn(4, 3, 32, 32)
    after = []
    for grouped in (False, True):
        model, loss = small_model(), torch.nn.Linear(2, 2)
        params = (param_groups(model, loss, 1e-3, {}) if grouped
                  else list(model.parameters()) + list(loss.parameters()))
        opt = adam(params, lr=1e-3, weight_decay=5e-4)
        for _ in range(2):
            opt.zero_grad()
            model(x).square().mean().backward()
            opt.step()
        after.append(torch.cat([p.detach().flatten() for p in model.parameters()]))
    assert torch.equal(after[0], after[1])


@pytest.mark.parametrize("override, match", [("train.layer_lr.layer5=2", r"train.layer_lr: unknown value 'layer5'"),
                                             ("train.layer_lr.layer2=0", r"train.layer_lr.layer2")])
def test_a_bad_stage_or_scale_is_one_line(override, match):
    with pytest.raises(CapawareError, match=match):
        load_config("configs/demo/demo_caption.yaml", [override])
