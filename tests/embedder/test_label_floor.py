"""The label-distance floor (embedder/labels/floor.py, issue #46): identical labels no longer give the
log-ratio log(eps); every ordering is kept; a bad setting is refused in one line."""
from __future__ import annotations

import numpy as np
import pytest
import torch

from capcore.errors import CapawareError
from embedder.config import load_config
from embedder.labels.floor import FlooredSpace, floor_value, floored_graph, zero_count
from embedder.labels.graph import build_graph_bruteforce
from embedder.losses.log_ratio import log_ratio_loss
from tests.toy_spaces import LineLabels


def labels() -> LineLabels:
    """Items 0 and 1 share a label (distance 0 between different images), as identical caption sets do."""
    return LineLabels([0.0, 0.0, 0.5, 1.0, 2.0, 3.5])


def test_the_floor_keeps_every_ordering_and_lifts_only_identical_labels():
    real = labels()
    graph = build_graph_bruteforce(real, m=3, progress=False)
    assert zero_count(graph) == 2  # 0 -> 1 and 1 -> 0
    floor = floor_value("half_min", graph)
    assert floor == pytest.approx(0.25)  # half of 0.5, the smallest positive neighbour distance
    everyone = np.arange(6)
    d_real, d_floor = real.pairwise(everyone, everyone), FlooredSpace(real, floor).pairwise(everyone, everyone)
    assert d_floor[0, 1] == d_floor[1, 0] == pytest.approx(0.25) and np.all(np.diag(d_floor) == 0)
    off = ~np.eye(6, dtype=bool)
    assert np.array_equal(d_floor[off], np.maximum(d_real[off], 0.25))
    for a in everyone:  # the same strict order of every other item, as mining and ranking losses see it
        others = everyone[everyone != a]
        r, f = d_real[a, others], d_floor[a, others]
        assert np.array_equal(np.sign(r[:, None] - r[None, :]), np.sign(f[:, None] - f[None, :]))
    assert zero_count(floored_graph(graph, floor)) == 0
    assert floor_value("none", graph) is None and floor_value("0.1", graph) == pytest.approx(0.1)


def test_identical_labels_no_longer_dominate_the_log_ratio():
    real = labels()
    emb = torch.tensor([[0.0, 0.0], [0.3, 0.0], [0.0, 0.7], [1.0, 0.0], [0.0, 1.4], [2.0, 2.0]])
    anchors = torch.tensor([0])
    everyone = np.arange(6)
    raw = torch.from_numpy(real.pairwise([0], everyone))
    floored = torch.from_numpy(FlooredSpace(real, 0.25).pairwise([0], everyone))
    without, with_floor = log_ratio_loss(emb, anchors, raw), log_ratio_loss(emb, anchors, floored)
    # the zero pair's residual log(0.09 + 1e-6) - log(1e-6) ~ 11.4 dominates without the floor
    assert without > 10 * with_floor and with_floor < 2


@pytest.mark.parametrize("value", ["oops", "-1", "0"])
def test_a_bad_floor_is_refused_in_one_line(value):
    with pytest.raises(CapawareError, match="train.label_floor"):
        load_config("configs/demo/demo_caption.yaml", [f"train.label_floor={value}"])
