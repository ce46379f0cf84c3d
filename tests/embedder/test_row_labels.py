"""A stage-one row's training labels (embedder/row_labels.py, issue #46): real, shuffled (Cap-shuffled), the
kinds present (Img-adapted), each with the label floor; a bad choice is refused in one line."""
from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from capcore.errors import CapawareError
from embedder.config import load_config
from embedder.labels.graph import build_graph_bruteforce
from embedder.labels.kinds import KindsSpace
from embedder.labels.shuffled import single_cycle
from embedder.row_labels import row_labels
from tests.toy_spaces import LineLabels

KINDS = [["red circle"], ["red circle"], ["blue star", "red circle"], ["blue star"], ["green square"],
         ["blue star", "green square", "red circle"], ["green square"], ["red circle", "green square"]]


def fake_track():
    space = LineLabels([0.0, 0.3, 0.35, 1.0, 1.7, 2.2, 3.0, 3.05])
    records = SimpleNamespace(attributes=[{"object": k} for k in KINDS])
    return SimpleNamespace(train_space=space, graph=build_graph_bruteforce(space, 3, progress=False),
                           train_bank=SimpleNamespace(records=records), row_labels={})


def cfg(floor="none"):
    return SimpleNamespace(seed=4, graph=SimpleNamespace(m=3), train=SimpleNamespace(label_floor=floor))


def test_each_row_gets_its_own_labels_and_the_same_images():
    track = fake_track()
    space, nn = row_labels(track, cfg(), "real")
    assert space is track.train_space and np.array_equal(nn, track.graph.nn_idx)
    shuffled, nn_s = row_labels(track, cfg(), "shuffled")
    owner = single_cycle(8, 4)  # drawn from the study's seed
    everyone = np.arange(8)
    assert np.allclose(shuffled.pairwise(everyone, everyone), space.pairwise(owner, owner))
    kinds, nn_k = row_labels(track, cfg(), "kinds")
    d = kinds.pairwise(everyone, everyone)
    for i in everyone:  # the number of kinds one image has and the other lacks
        for j in everyone:
            assert d[i, j] == len(set(KINDS[i]) ^ set(KINDS[j]))
    assert d[0, 1] == 0 and nn_k.shape == (8, 3)
    assert row_labels(track, cfg(), "kinds")[0] is kinds  # built once per study


def test_the_floor_applies_to_every_kind_of_label(capsys):
    track = fake_track()
    kinds, _ = row_labels(track, cfg("half_min"), "kinds")
    assert kinds.pairwise([0], [1])[0, 0] == pytest.approx(0.5)  # identical kinds: half the smallest positive (1)
    assert kinds.pairwise([0], [0])[0, 0] == 0
    assert "labels (kinds): " in capsys.readouterr().out


def test_kinds_need_the_datasets_kinds_and_a_bad_choice_is_refused():
    with pytest.raises(CapawareError, match="kinds needs"):
        KindsSpace(SimpleNamespace(attributes=None))
    with pytest.raises(CapawareError, match="labels"):
        load_config("configs/demo/demo_caption.yaml", ["method.labels=noise"])
