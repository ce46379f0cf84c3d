import numpy as np
import pytest

from embedder.labels.graph import top_m_sorted
from embedder.sampler import AnchorBatchSampler


@pytest.fixture
def graph():
    pts = np.random.default_rng(0).normal(size=(60, 3))
    d = ((pts[:, None] - pts[None]) ** 2).sum(-1)
    idx, _ = top_m_sorted(d, np.arange(60), 10)
    return idx


@pytest.mark.parametrize("anchors_per_batch", [1, 3])
def test_batches_hold_anchor_neighbours_and_distinct_items(graph, anchors_per_batch):
    sampler = AnchorBatchSampler(graph, batch_size=20, k=5, anchors_per_batch=anchors_per_batch, seed=1)
    seen = []
    for _, batch in sampler.epoch(0):
        items = batch.items
        assert len(set(items.tolist())) == len(items)  # without replacement
        anchors = items[batch.anchors]
        seen.extend(anchors.tolist())
        for a in anchors:
            assert set(graph[a, :5]) <= set(items.tolist())  # its k nearest are in the batch
        assert len(items) == 20 or len(anchors) < anchors_per_batch
    assert sorted(seen) == list(range(60))  # every anchor once per epoch


def test_epochs_reshuffle_and_batches_are_reproducible(graph):
    sampler = AnchorBatchSampler(graph, batch_size=20, k=5, seed=1)
    assert not np.array_equal(sampler.anchor_order(0), sampler.anchor_order(1))
    again = AnchorBatchSampler(graph, batch_size=20, k=5, seed=1)
    assert np.array_equal(sampler.batch(2, 7).items, again.batch(2, 7).items)
    other_seed = AnchorBatchSampler(graph, batch_size=20, k=5, seed=2)
    assert not np.array_equal(sampler.batch(2, 7).items, other_seed.batch(2, 7).items)


def test_random_members_are_spread_over_the_set(graph):
    sampler = AnchorBatchSampler(graph, batch_size=20, k=5, seed=3)
    counts = np.zeros(60)
    for _, batch in sampler.epoch(0):
        counts[batch.items[6:]] += 1
    assert counts.min() > 0  # every item is drawn as a random member at some point


def test_batch_too_small_for_anchor_groups_is_refused(graph):
    with pytest.raises(ValueError):
        AnchorBatchSampler(graph, batch_size=10, k=5, anchors_per_batch=2)
