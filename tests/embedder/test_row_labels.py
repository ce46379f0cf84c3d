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


class Flat:
    """n items at equal distance from each other: every neighbour is a tie."""
    name = "flat"

    def __init__(self, n: int):
        self.n = n

    def __len__(self) -> int:
        return self.n

    def pairwise(self, rows, cols):
        return np.ones((len(rows), len(cols)), np.float32)

    def params(self) -> dict:
        return {}


def test_ties_are_broken_at_random_from_the_seed_so_no_id_is_over_drawn():
    """Issue #56: by id, every query's tied neighbours were the lowest ids. Over 600 seeds, each of the 11 tied
    candidates of image 0 is drawn 600 x 3 / 11 = 164 times in expectation (sd 11.6): within ±25% of it."""
    by_id = build_graph_bruteforce(Flat(12), 3, progress=False).nn_idx
    assert by_id[0].tolist() == [1, 2, 3] and by_id[5].tolist() == [0, 1, 2]
    counts = np.zeros(12, int)
    for seed in range(600):
        graph = build_graph_bruteforce(Flat(12), 3, progress=False, tie_seed=seed)
        assert not np.any(graph.nn_idx == np.arange(12)[:, None])  # never itself
        np.add.at(counts, graph.nn_idx[0], 1)
    assert counts[0] == 0 and counts.sum() == 1800
    assert np.all(np.abs(counts[1:] - 1800 / 11) < 0.25 * 1800 / 11), counts
    one = build_graph_bruteforce(Flat(12), 3, progress=False, tie_seed=7)
    assert np.array_equal(one.nn_idx, build_graph_bruteforce(Flat(12), 3, progress=False, tie_seed=7).nn_idx)
    halves = [build_graph_bruteforce(Flat(12), 3, progress=False, tie_seed=7, rows=r).nn_idx for r in ((0, 5), (5, 12))]
    assert np.array_equal(np.concatenate(halves), one.nn_idx)  # a row's order is its own: shards agree
    assert len({tuple(r) for r in one.nn_idx[:, :1].tolist()}) > 1  # rows do not all share one order


def test_a_seed_leaves_distinct_distances_in_their_order():
    space = LineLabels(np.random.default_rng(1).uniform(0, 3, 8).tolist())  # no two distances equal
    plain, seeded = (build_graph_bruteforce(space, 3, progress=False, tie_seed=s) for s in (None, 3))
    assert np.array_equal(plain.nn_idx, seeded.nn_idx) and np.array_equal(plain.nn_dist, seeded.nn_dist)


def test_self_labels_are_the_frozen_trunks_own_feature_distances():
    """Img-self (issue #56): the neighbours are the nearest images in the initial trunk's feature space, by an
    independent all-pairs computation."""
    features = np.random.default_rng(0).normal(size=(8, 5)).astype(np.float32)
    track = fake_track()
    space, nn = row_labels(track, cfg(), "self", init_features=lambda: (features, "trunk"))
    direct = np.sqrt(((features[:, None, :].astype(np.float64) - features[None, :, :]) ** 2).sum(-1))
    assert np.allclose(space.pairwise(np.arange(8), np.arange(8)), direct, atol=1e-5)
    np.fill_diagonal(direct, np.inf)
    assert np.array_equal(nn, np.argsort(direct, axis=1)[:, :3])
    assert space.params() == {"features": "trunk", "dim": 5}
