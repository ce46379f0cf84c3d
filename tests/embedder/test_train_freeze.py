"""train.freeze: the trunk's first stages keep their weights; the rest trains from their cached maps."""
import numpy as np
import pytest
import torch

from capcore.errors import CapawareError
from embedder.config import load_config
from embedder.model import Embedder


def test_split_trunk_composes_to_the_trunk():
    torch.manual_seed(0)
    model = Embedder("resnet18", 8).eval()
    x = torch.randn(2, 3, 64, 64)
    for stage in ("none", "stem", "layer2", "layer3"):
        prefix, rest = model.split_trunk(stage)
        with torch.no_grad():
            assert torch.allclose(rest(prefix(x)), model.trunk(x), atol=1e-5), stage
    assert len(model.split_trunk("none")[0]) == 0
    with pytest.raises(CapawareError, match="train.freeze"):
        model.split_trunk("layer4")


def test_frozen_stages_keep_their_weights_and_statistics(tmp_path):
    from embedder.rows import prepare_track
    from embedder.train import train_method

    cfg = load_config("configs/demo/demo_pose.yaml", [
        f"data.root={tmp_path / 'poses'}", f"out_dir={tmp_path / 'run'}", "data.input_size=32",
        "data.synthetic.n_train=40", "data.synthetic.n_test=6", "data.synthetic.size=32",
        "train.batch_size=16", "train.k=3", "train.anchors_per_batch=2", "train.epochs=0.2",
        "graph.m=8", "train.positives=4", "model.embed_dim=8", "train.freeze=layer3", "train.lr=0.05",
        "train.precision=float32"])
    track = prepare_track(cfg)
    torch.manual_seed(cfg.seed)
    before = Embedder(cfg.model.arch, 8).state_dict()  # build_model draws the same initial weights
    ckpt = train_method(cfg, cfg.methods[0], tmp_path / "m", track.train_bank, track.train_space,
                        track.graph.nn_idx, progress=False)
    after = torch.load(ckpt, weights_only=True)["model"]
    frozen = [k for k in before if k.startswith("trunk.") and not k.startswith(("trunk.layer4", "trunk.fc"))]
    assert frozen and all(torch.equal(before[k], after[k]) for k in frozen)  # weights and BN running stats
    trained = [k for k in before if k.startswith(("trunk.layer4", "head")) and before[k].dtype.is_floating_point]
    assert any(not torch.equal(before[k], after[k]) for k in trained)
    assert np.isfinite(after["head.weight"].numpy()).all()
