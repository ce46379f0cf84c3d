"""Stage two on backbones that are not ResNets, through the one door (``embedder.backbones``; issue #57): a tiny timm
ViT and a tiny timm ConvNeXt with random weights, saved to local weight files (.safetensors and .pth) and loaded
back by ``backbone.weights``; their features against a forward written independently here (timm's own calls);
the widths downstream from the table; a file that does not fit, and an unknown name, in one line."""
from __future__ import annotations

import h5py
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from capcore.errors import CapawareError
from embedder.backbones import backbone, width
from feature_extract import dump as dump_mod
from feature_extract.config import load_features_config
from tests.feature_extract.test_features import image_paths, write_image_set

timm = pytest.importorskip("timm")
pytestmark = pytest.mark.usefixtures("one_thread")
VIT, CONVNEXT = "timm:vit_tiny_patch16_224", "timm:convnext_atto"


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    from safetensors.torch import save_file

    root = tmp_path_factory.mktemp("backbones")
    torch.manual_seed(0)
    vit = timm.create_model(VIT[5:], pretrained=False, dynamic_img_size=True)  # with its classifier, as a file has it
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(root / "vit.safetensors"))
    convnext = timm.create_model(CONVNEXT[5:], pretrained=False)
    torch.save({"state_dict": convnext.state_dict()}, root / "convnext.pth")
    return {"json": write_image_set(root / "data"), "root": root, "vit": (vit.eval(), root / "vit.safetensors"),
            "convnext": (convnext.eval(), root / "convnext.pth")}


def dump(world, arch: str, weights, out, **kw):
    settings = {"backbone.checkpoint": "imagenet", "backbone.arch": arch, "backbone.weights": weights,
                "images.captions": world["json"], "out": out, "input.size": 64, "att_size": 2, "batch_size": 3,
                "num_workers": 0, "dtype": "float32", "precision": "float32", **kw}
    cfg = load_features_config(None, [f"{k}={v}" for k, v in settings.items()])
    return dump_mod.dump(cfg, "test", progress=False)


def direct(net, paths, norm):
    """Square 64 px, the model's normalisation, timm's forward_features; tokens back to the grid by hand."""
    mean, std = (torch.tensor(v).view(1, 3, 1, 1) for v in norm)
    atts, fcs = [], []
    for p in paths:
        img = Image.open(p).convert("RGB").resize((64, 64), Image.BILINEAR)
        x = (torch.from_numpy(np.asarray(img, dtype=np.float32) / 255).permute(2, 0, 1)[None] - mean) / std
        with torch.no_grad():
            out = net.forward_features(x)
            if out.dim() == 3:  # ViT: [1, 1 + 16, C]: the class token, then a 4 x 4 grid of patches
                grid = out[0, 1:].reshape(4, 4, -1).permute(2, 0, 1)
                fc = net.forward_head(out, pre_logits=True)[0]
            else:
                grid, fc = out[0], out[0].mean((1, 2))
        atts.append(F.adaptive_avg_pool2d(grid, 2).permute(1, 2, 0).reshape(4, -1).numpy())
        fcs.append(fc.numpy())
    return np.stack(atts), np.stack(fcs)


@pytest.mark.parametrize("name, arch, channels", [("vit", VIT, 192), ("convnext", CONVNEXT, 320)])
def test_a_timm_backbone_from_a_local_file_gives_the_features_of_its_own_forward(world, tmp_path, name, arch,
                                                                                  channels):
    net, weights = world[name]
    out = tmp_path / f"{name}.h5"
    dump(world, arch, weights, out)
    with h5py.File(out) as f:
        att, fc = f["att"][:], f["fc"][:]
        assert (f.attrs["arch"], int(f.attrs["channels"]), f.attrs["backbone"]) == (arch, channels, "pretrained")
    assert att.shape == (8, 4, channels) and fc.shape == (8, channels) and width(arch) == channels
    norm = backbone(arch).build().norm
    want_att, want_fc = direct(net, image_paths(world), norm)
    np.testing.assert_allclose(att, want_att, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(fc, want_fc, rtol=1e-4, atol=1e-4)
    if name == "vit":  # the class token, which is not the mean of the patch grid
        assert not np.allclose(fc, att.mean(1), atol=1e-3)


def test_a_weight_file_of_another_model_or_none_is_one_line(world, tmp_path):
    with pytest.raises(CapawareError, match="tensors do not fit timm:convnext_atto") as err:
        dump(world, CONVNEXT, world["vit"][1], tmp_path / "x.h5")
    assert str(world["vit"][1]) == err.value.where and "backbone.arch" in err.value.fix
    with pytest.raises(CapawareError, match="never downloads"):
        dump(world, VIT, "''", tmp_path / "y.h5")
    with pytest.raises(CapawareError, match="unknown backbone 'vit_tiny'") as err:
        backbone("vit_tiny")
    assert "timm:NAME" in err.value.fix
    assert not list(tmp_path.glob("*.h5"))


def test_verify_prints_the_files_own_label(world, tmp_path, capsys):
    """A ViT file labelled ViT-Ti is called so by ``feature_extract.verify``, not by its kind's default (Custom)."""
    from feature_extract.verify import main as verify_main

    labelled, plain = tmp_path / "vit.h5", tmp_path / "plain.h5"
    dump(world, VIT, world["vit"][1], labelled, label="ViT-Ti")
    dump(world, VIT, world["vit"][1], plain)
    for path, label in ((labelled, "ViT-Ti"), (plain, "Custom")):
        verify_main([str(path)])
        line = capsys.readouterr().out.strip()
        assert line.startswith(f"ok: {path}: 8 images") and f"pretrained {VIT} (" in line
        assert line.endswith(f"-> {label}"), line


def test_widths_come_from_the_table_for_every_family():
    assert [width(a) for a in ("resnet18", "resnet50", "torchvision:resnet50", "torchvision:convnext_tiny",
                               "torchvision:vit_b_16")] == [512, 2048, 2048, 768, 768]


def test_no_channel_width_is_written_outside_the_backbone_table():
    """Issue #57: widths come from embedder.backbones (or a features file); no product module holds a literal
    tuple, dict, list, set, comparison or conditional with a backbone width in it (the old ``2048 if arch in WIDE
    else 512`` tables in the planner and the doctor)."""
    import ast
    from pathlib import Path

    root = Path(__file__).resolve().parents[2]
    widths = {192, 320, 384, 512, 768, 1024, 1280, 1536, 2048}  # ResNets', and common ViT/ConvNeXt/EfficientNet widths
    found = []
    for pkg in ("capaware", "capcore", "capdata", "captioners", "embedder", "eval", "feature_extract", "rl"):
        for path in sorted((root / pkg).rglob("*.py")):
            if path == root / "embedder" / "backbones.py":
                continue
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, (ast.Dict, ast.Tuple, ast.Set, ast.List, ast.IfExp, ast.Compare)):
                    found += [f"{path.relative_to(root)}:{node.lineno}" for c in ast.walk(node)
                              if isinstance(c, ast.Constant) and type(c.value) is int and c.value in widths]
    assert found == [], found
