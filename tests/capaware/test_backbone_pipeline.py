"""Feature sets through one door, end to end (issue #57): the tiny pipeline through ``capaware run`` with three more
features entries beside its ResNet ones (Img, the class-pretrained ResNet-10; Cap, stage one's): a tiny timm ViT
and a tiny timm ConvNeXt with random weights saved to local files, and a toy backbone from a plugin file outside
the tree (tests/toy_plugins/toy_backbone.py: one file, one registration). Every captioner trains on every file the
features entries write (no feature_sets list), and Table 1 has a row for each, labelled by its config."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import torch
import yaml

from tests.pipeline_helpers import ROOT, TINY, env

timm = pytest.importorskip("timm")


@pytest.mark.integration  # a whole tiny pipeline with five feature sets: about 4 minutes on 2 cores
@pytest.mark.timeout(1200)
def test_vit_convnext_and_a_plugin_backbone_get_table1_rows_beside_the_resnets(tmp_path):
    from safetensors.torch import save_file

    from tests.toy_plugins.toy_backbone import ToyGrid

    torch.manual_seed(0)
    weights = {"vit": tmp_path / "vit_tiny.safetensors", "convnext": tmp_path / "convnext_atto.pth",
               "toy": tmp_path / "toy.pth"}
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, dynamic_img_size=True)
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(weights["vit"]))
    torch.save(timm.create_model("convnext_atto", pretrained=False).state_dict(), weights["convnext"])
    torch.save(ToyGrid().state_dict(), weights["toy"])
    shutil.copy(ROOT / "tests" / "toy_plugins" / "toy_backbone.py", tmp_path / "my_backbone.py")

    cfg = yaml.safe_load(TINY.read_text())
    img = cfg["features"][0]  # the tiny Img entry: its sizes, any backbone in its place
    for name, arch, label in (("vit", "timm:vit_tiny_patch16_224", "ViT"), ("convnext", "timm:convnext_atto",
                                                                           "ConvNeXt"), ("toy", "toy_grid", "Toy")):
        cfg["features"].append(f"{img} backbone.checkpoint=imagenet backbone.arch={arch} backbone.weights="
                               f"{weights[name]} label={label} out=${{run_dir}}/features/{name}.h5")
    cfg.update(plugins=["my_backbone.py"], report=False)  # beside the pipeline config, as a user keeps it
    assert "feature_sets" not in cfg
    config = tmp_path / "pipeline.yaml"
    config.write_text(yaml.safe_dump(cfg, sort_keys=False))
    out = subprocess.run(["python", "-m", "capaware", "run", str(config), "--run", str(tmp_path / "run")], cwd=ROOT,
                         env=env(), capture_output=True, text=True, timeout=1100)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]

    rows = json.loads((tmp_path / "run" / "results" / "captioning" / "captioning.json").read_text())["rows"]
    got = {(r["features"], r["training"]) for r in rows}
    assert got == {(f, t) for f in ("Img", "Cap", "ViT", "ConvNeXt", "Toy") for t in ("XE", "RL")}, got
    assert all(r["C"] is not None and r["n_images"] == 16 for r in rows)
    import h5py

    for name, channels in (("vit", 192), ("convnext", 320), ("toy", ToyGrid.width)):
        with h5py.File(tmp_path / "run" / "features" / f"{name}.h5", "r") as f:
            assert f["att"].shape[1:] == (4, channels) and f["fc"].shape[1] == channels  # a 2 x 2 grid, its width
