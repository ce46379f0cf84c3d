"""The shuffled-label control (embedder/labels/shuffled.py, issue #46): the shuffled labels are the real ones
with other owners, and the shuffled neighbour graph equals a fresh search over the shuffled labels."""
from __future__ import annotations

import numpy as np

from embedder.labels.graph import build_graph_bruteforce
from embedder.labels.shuffled import ShuffledSpace, shuffled_graph, single_cycle
from tests.toy_spaces import LineLabels


def points(n: int, decimals: int = 1) -> LineLabels:
    """Points on a line, rounded so that some labels tie (the graph's (distance, index) order is exercised)."""
    return LineLabels(np.round(np.random.default_rng(5).uniform(0, 4, n), decimals))


def test_a_single_cycle_leaves_no_image_its_own_label_and_depends_on_its_seed_alone():
    owner = single_cycle(200, seed=3)
    assert sorted(owner) == list(range(200)) and not np.any(owner == np.arange(200))
    seen, i = set(), 0  # one cycle through every image
    while i not in seen:
        seen.add(i)
        i = owner[i]
    assert len(seen) == 200
    assert np.array_equal(owner, single_cycle(200, seed=3)) and not np.array_equal(owner, single_cycle(200, seed=4))


def test_the_shuffled_labels_are_the_real_rows_with_other_owners():
    real = points(60)
    owner = single_cycle(60, seed=1)
    fake = ShuffledSpace(real, owner, seed=1)
    everyone = np.arange(60)
    d_real, d_fake = real.pairwise(everyone, everyone), fake.pairwise(everyone, everyone)
    # the same multiset of rows (each row's sorted distances), each now owned by another image
    assert sorted(map(tuple, np.sort(d_real, 1))) == sorted(map(tuple, np.sort(d_fake, 1)))
    assert np.array_equal(np.sort(d_fake[5]), np.sort(d_real[owner[5]]))
    differs = [not np.array_equal(np.sort(d_fake[i]), np.sort(d_real[i])) for i in everyone]
    assert sum(differs) > 50  # rows that moved (a few owners may share a label by chance)
    assert np.allclose(np.diag(d_fake), 0) and fake.params()["shuffled_labels_seed"] == 1


def test_the_shuffled_graph_equals_a_search_over_the_shuffled_labels():
    everyone = np.arange(80)
    for decimals in (6, 1):  # distinct labels, then ties at the top-m boundary
        real = points(80, decimals)
        owner = single_cycle(80, seed=7)
        fake = ShuffledSpace(real, owner, 7)
        searched = build_graph_bruteforce(fake, m=6, progress=False)
        derived = shuffled_graph(build_graph_bruteforce(real, m=6, progress=False), owner)
        assert np.array_equal(derived.nn_dist, searched.nn_dist)
        dist = fake.pairwise(everyone, everyone)
        assert np.allclose(dist[everyone[:, None], derived.nn_idx], derived.nn_dist)  # each at its listed distance
        assert not np.any(derived.nn_idx == everyone[:, None])  # self still excluded
        if decimals == 6:  # no ties: the very same neighbours in the same order
            assert np.array_equal(derived.nn_idx, searched.nn_idx)
