"""One lr schedule family for stage one and class pretraining (embedder.schedule, issue #38): the same
numbers, bit for bit, as the two functions it replaced, and one ``lr_factor`` in the tree."""
import math
import re
from pathlib import Path
from types import SimpleNamespace

import pytest
import torch

from capcore.errors import CapawareError
from embedder.schedule import lr_factor, pretrain_lr, stage_one_lr

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.parametrize("decay,end,per_epoch,total", [(0.9, None, 7, 40), (0.5, None, 3, 3), (0.9, 0.2, 7, 40),
                                                       (0.9, 0.25, 300, 150), (0.9, 1.0, 5, 9)])
def test_stage_one_decay_is_bitwise_the_one_it_replaced(decay, end, per_epoch, total):
    t = SimpleNamespace(lr_decay=decay, lr_end_fraction=end)
    factor = stage_one_lr(t, per_epoch, total)
    was = (lambda s: decay ** (s / per_epoch)) if end is None else (lambda s: end ** (s / total))
    assert all(factor(s) == was(s) for s in range(total + 1))


def test_stage_one_scheduler_lrs_are_bitwise_the_ones_it_replaced():
    t = SimpleNamespace(lr_decay=0.9, lr_end_fraction=0.2)
    lrs = []
    for schedule in (stage_one_lr(t, 7, 40), lambda s: 0.2 ** (s / 40)):
        opt = torch.optim.SGD([torch.zeros(1, requires_grad=True)], lr=0.05)
        sched = torch.optim.lr_scheduler.LambdaLR(opt, schedule)
        lrs.append([sched.get_last_lr()[0]]
                   + [(opt.step(), sched.step(), sched.get_last_lr()[0])[2] for _ in range(40)])
        assert sched.state_dict()["lr_lambdas"] == [None]  # a plain function: nothing of it in last.pt
    assert lrs[0] == lrs[1]


def test_a_bad_lr_end_fraction_is_refused_in_one_line():
    from embedder.config import load_config  # the config is the one place that checks it

    with pytest.raises(CapawareError, match="train.lr_end_fraction"):
        load_config(str(ROOT / "configs/demo/demo_pose.yaml"), ["train.lr_end_fraction=0.0"])


@pytest.mark.parametrize("total", [1, 6, 40, 281])
def test_pretraining_schedules_are_bitwise_the_ones_they_replaced(total):
    cosine, none = (pretrain_lr(SimpleNamespace(lr_decay="cosine"), total),
                    pretrain_lr(SimpleNamespace(lr_decay="none"), total))
    for s in range(total + 1):
        assert cosine(s) == 0.5 * (1.0 + math.cos(math.pi * s / total)) and none(s) == 1.0
    from embedder.config import load_config  # the config is the one place that checks it

    with pytest.raises(CapawareError, match="pretrain.lr_decay"):
        load_config(str(ROOT / "configs/demo/demo_pose.yaml"), ["pretrain.lr_decay=linear"])


def test_lr_factor_kinds():
    assert lr_factor("none", 3, 10) == 1.0 and lr_factor("cosine", 5, 10) == pytest.approx(0.5)
    assert lr_factor("exponential", 10, 10, 0.25) == 0.25 and lr_factor("exponential", 6, 10, 0.5, 3) == 0.25
    with pytest.raises(ValueError, match="linear"):
        lr_factor("linear", 0, 10)


def test_lr_factor_has_one_meaning_in_the_tree():
    """Defined once (embedder/schedule.py); no other module names a function of its own so."""
    folders = [d for d in ROOT.iterdir() if d.is_dir() and d.name not in (".venv", ".git", "runs")]
    defined = [str(p.relative_to(ROOT)) for d in folders for p in d.rglob("*.py")
               if re.search(r"^\s*def lr_factor\b", p.read_text(), re.M)]
    assert defined == ["embedder/schedule.py"]
