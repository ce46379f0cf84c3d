"""Head warm-up (LP-FT): only the head learns, the trunk (weights and BatchNorm buffers) is untouched."""
import numpy as np
import torch

from embedder.config import MethodConfig, TrainConfig
from embedder.data import normalise
from embedder.head_warmup import pooled_features, warm_up_head
from embedder.model import build_model
from embedder.sampler import AnchorBatchSampler
from embedder.losses.method_loss import MethodLoss
from embedder.train import StepBatches


class Bank:
    """ImageBank's two methods the warm-up uses, over random images."""

    def __init__(self, n: int):
        self.images = torch.from_numpy(np.random.default_rng(0).integers(0, 256, (n, 3, 32, 32), dtype=np.uint8))

    def __len__(self):
        return len(self.images)

    def uint8(self, index):
        return self.images[torch.as_tensor(index)]


class Space:
    """Labels on a line: D(y_a, y_b) = |a - b|, so the label order is known."""

    def pairwise(self, a, b):
        return np.abs(np.asarray(a, np.float32)[:, None] - np.asarray(b, np.float32)[None, :])


def test_warm_up_trains_the_head_alone_and_lowers_the_loss():
    n = 40
    idx = np.arange(n)
    nn_idx = np.stack([np.argsort(np.abs(idx - i))[1:9] for i in idx]).astype(np.int32)
    sampler = AnchorBatchSampler(nn_idx, 16, 3, 2, seed=0)
    bank, space = Bank(n), Space()
    torch.manual_seed(0)
    model = build_model("resnet18", 8, "none")
    criterion = MethodLoss(MethodConfig(loss="log_ratio", mining="dense"), TrainConfig(log_ratio_eps=1e-6), 0)
    trunk_before = {k: v.clone() for k, v in model.trunk.state_dict().items()}
    head_before = model.head.weight.detach().clone()
    batches = StepBatches(sampler, bank, space, nn_idx, 4, 0, 60)
    _, rest = model.split_trunk("none")
    feats = pooled_features(rest, lambda index: normalise(bank.uint8(index), "cpu"), n)
    losses = warm_up_head(model, criterion, batches, feats, 60, 1e-2, torch.device("cpu"))
    assert len(losses) == 60 and np.mean(losses[-10:]) < 0.7 * np.mean(losses[:10])
    for key, value in model.trunk.state_dict().items():
        assert torch.equal(value, trunk_before[key]), key  # running stats included: BN stayed in eval mode
    assert not torch.equal(model.head.weight, head_before)
    assert model.training  # handed back in train mode for the fine-tune


def test_pooled_features_from_cached_frozen_maps_equal_the_whole_trunk():
    """The warm-up reads the rest of the trunk over the frozen prefix's cached maps instead of pixels:
    the features must be the eval-mode trunk's own."""
    from embedder.train import compute_frozen_maps

    bank = Bank(20)
    torch.manual_seed(1)
    model = build_model("resnet10", 8, "none")
    for p in model.trunk.parameters():  # BatchNorm with running statistics other than the defaults
        p.data.add_(0.05 * torch.randn_like(p))
    prefix, rest = model.split_trunk("layer3")
    maps = compute_frozen_maps(prefix, bank, torch.device("cpu"), None)
    from_maps = pooled_features(rest, lambda index: maps[torch.as_tensor(index)], len(bank))
    model.eval()
    with torch.no_grad():
        whole = model.trunk(normalise(bank.uint8(np.arange(len(bank))), "cpu"))
    torch.testing.assert_close(from_maps, whole, rtol=1e-4, atol=1e-5)
