"""joint/recall.py against an independent computation (issue #66): every R@K against torchmetrics'
RetrievalHitRate, every rank, medr and meanr against a NumPy stable argsort per query, on random embeddings (five
captions an image, and one to seven in shuffled order); a perfect space; the 1K folds; ties."""
from __future__ import annotations

import math
import statistics

import numpy as np
import pytest
import torch

from joint.recall import Folds, RankMetrics, folds, query_ranks, rank_metrics


def random_space(n_images: int, captions, dim: int = 16, seed: int = 0, shuffle: bool = False):
    """l2-normalised float64 embeddings; ``captions`` per image (an int, or a (low, high) range drawn per image)."""
    rng = np.random.default_rng(seed)
    counts = (np.full(n_images, captions) if isinstance(captions, int)
              else rng.integers(captions[0], captions[1] + 1, n_images))
    owner = np.repeat(np.arange(n_images), counts)
    if shuffle:
        owner = rng.permutation(owner)
    img = rng.standard_normal((n_images, dim))
    txt = img[owner] + 1.5 * rng.standard_normal((len(owner), dim))  # related to its image, not too easily
    img /= np.linalg.norm(img, axis=1, keepdims=True)
    txt /= np.linalg.norm(txt, axis=1, keepdims=True)
    return img, txt, owner


def numpy_ranks(img, txt, owner):
    """0-based ranks and top-1 by a stable argsort of each query's scores, highest first (lower index on ties)."""
    i2t, i2t_top1 = [], []
    for i, scores in enumerate(img @ txt.T):
        order = np.argsort(-scores, kind="stable")
        i2t.append(min(int(np.flatnonzero(order == j)[0]) for j in np.flatnonzero(owner == i)))
        i2t_top1.append(order[0])
    t2i, t2i_top1 = [], []
    for j, scores in enumerate(txt @ img.T):
        order = np.argsort(-scores, kind="stable")
        t2i.append(int(np.flatnonzero(order == owner[j])[0]))
        t2i_top1.append(order[0])
    return np.array(i2t), np.array(t2i), np.array(i2t_top1), np.array(t2i_top1)


def hit_rates(scores: np.ndarray, relevant: np.ndarray, ks) -> tuple[float, ...]:
    """torchmetrics' RetrievalHitRate (a query hits if any relevant candidate is in its top k), in percent."""
    from torchmetrics.retrieval import RetrievalHitRate

    queries = torch.arange(scores.shape[0]).repeat_interleave(scores.shape[1])
    preds, target = torch.as_tensor(scores).flatten(), torch.as_tensor(relevant).flatten()
    return tuple(100.0 * float(RetrievalHitRate(top_k=k)(preds, target, indexes=queries)) for k in ks)


CASES = {"five captions": dict(n_images=30, captions=5), "one to seven, shuffled":
         dict(n_images=40, captions=(1, 7), seed=1, shuffle=True), "more images": dict(n_images=60, captions=(2, 3),
                                                                                        dim=8, seed=2)}


@pytest.mark.parametrize("case", CASES.values(), ids=CASES.keys())
def test_every_number_matches_an_independent_computation(case):
    img, txt, owner = random_space(**case)
    got = rank_metrics(torch.as_tensor(img), torch.as_tensor(txt), torch.as_tensor(owner), chunk=7)
    i2t, t2i, _, _ = numpy_ranks(img, txt, owner)
    n_images = len(img)
    assert got.i2t == pytest.approx(hit_rates(img @ txt.T, owner[None, :] == np.arange(n_images)[:, None], got.ks))
    assert got.t2i == pytest.approx(hit_rates(txt @ img.T, np.arange(n_images)[None, :] == owner[:, None], got.ks))
    for side, ranks in (("i2t", i2t), ("t2i", t2i)):
        assert getattr(got, side) == pytest.approx(tuple(100.0 * np.mean(ranks < k) for k in (1, 5, 10)))
        assert getattr(got, f"{side}_medr") == math.floor(statistics.median(ranks.tolist())) + 1
        assert getattr(got, f"{side}_meanr") == pytest.approx(sum(ranks.tolist()) / len(ranks) + 1)
    assert got.rsum == pytest.approx(sum(got.i2t) + sum(got.t2i))
    assert 0 < got.i2t[0] < 100 and 0 < got.t2i[0] < 100  # neither trivial nor hopeless: the check bites


def test_per_query_ranks_and_first_retrieved_match_numpy():
    img, txt, owner = random_space(n_images=25, captions=(1, 7), seed=3, shuffle=True)
    got = query_ranks(img, txt, owner, chunk=4)
    for mine, theirs in zip(got, numpy_ranks(img, txt, owner)):
        assert mine.tolist() == theirs.tolist()


def test_i2t_is_a_hit_rate_not_a_recall():
    """Image 0's first caption is its best match, its second is last: a hit at R@1 (100), where a recall of its
    captions would be 50."""
    img = torch.tensor([[1.0, 0.0], [0.0, 1.0]])
    txt = torch.tensor([[1.0, 0.0], [-1.0, 0.0], [0.0, 1.0]])
    got = rank_metrics(img, txt, [0, 0, 1], ks=(1,))
    assert got.i2t == (100.0,) and got.i2t_medr == 1 and got.t2i == pytest.approx((200 / 3,))


def test_medr_floors_a_half_median_as_vsepp():
    """Ranks 0 and 1 each way (caption 1 ties with caption 0 for image 1 and loses on index): the median 0.5 gives
    medr floor(0.5) + 1 = 1, the mean 0.5 gives meanr 1.5."""
    img, txt = torch.tensor([[1.0, 0.0], [0.0, 1.0]]), torch.tensor([[1.0, 0.0], [1.0, 0.0]])
    got = rank_metrics(img, txt, [0, 1], ks=(1, 2))
    assert query_ranks(img, txt, [0, 1]).i2t.tolist() == query_ranks(img, txt, [0, 1]).t2i.tolist() == [0, 1]
    assert (got.i2t, got.t2i) == ((50.0, 100.0), (50.0, 100.0)) and got.rsum == 300
    assert (got.i2t_medr, got.i2t_meanr, got.t2i_medr, got.t2i_meanr) == (1, 1.5, 1, 1.5)


def test_a_perfect_space_scores_r1_100_and_medr_1():
    owner = np.repeat(np.arange(12), [5, 6, 7] * 4)
    img = np.eye(12)
    got = rank_metrics(img, img[owner], owner)
    assert got.i2t == got.t2i == (100.0, 100.0, 100.0)
    assert (got.i2t_medr, got.i2t_meanr, got.t2i_medr, got.t2i_meanr, got.rsum) == (1, 1, 1, 1, 600)


def test_ties_go_to_the_lower_index_whatever_the_chunk():
    """Every score equal: a caption's image ranks at its own index, an image's best caption is its first in the
    caption order."""
    owner = torch.tensor([2, 0, 1, 2, 0, 3, 1, 3])
    img, txt = torch.ones(4, 3), torch.ones(8, 3)
    first = [int(torch.nonzero(owner == i)[0]) for i in range(4)]
    for chunk in (1, 3, 256):
        got = query_ranks(img, txt, owner, chunk=chunk)
        assert got.t2i.tolist() == owner.tolist() and got.i2t.tolist() == first
        assert got.i2t_top1.tolist() == [0] * 4 and got.t2i_top1.tolist() == [0] * 8
    assert rank_metrics(img, txt, owner, chunk=1) == rank_metrics(img, txt, owner, chunk=5)


def test_folds_are_the_mean_of_the_blocks_scored_alone():
    img, txt, owner = random_space(n_images=2000, captions=(1, 3), dim=8, seed=4, shuffle=True)
    got = folds(img, txt, owner, size=1000)
    halves = []
    for start in (0, 1000):
        keep = (owner >= start) & (owner < start + 1000)
        halves.append(rank_metrics(img[start:start + 1000], txt[keep], owner[keep] - start))
    assert isinstance(got, Folds) and got.each == tuple(halves) and got.left_out == 0
    assert got.full == rank_metrics(img, txt, owner)
    expected = {key: (halves[0].as_dict()[key] + halves[1].as_dict()[key]) / 2 for key in halves[0].as_dict()}
    assert got.mean.as_dict() == pytest.approx(expected)
    assert got.mean.t2i[0] > got.full.t2i[0]  # a 1K fold has half the candidates: easier


def test_images_after_the_last_full_fold_are_left_out():
    img, txt, owner = random_space(n_images=25, captions=2, seed=5)
    got = folds(img, txt, owner, size=10)
    assert len(got.each) == 2 and got.left_out == 5 and got.mean == RankMetrics.mean(got.each)
    assert folds(img, txt, owner, size=100).mean is None


def test_the_report_forms():
    img, txt, owner = random_space(n_images=30, captions=5, seed=6)
    got = rank_metrics(img, txt, owner)
    row = got.as_dict()
    assert list(row) == ["i2t_r1", "i2t_r5", "i2t_r10", "i2t_medr", "i2t_meanr",
                         "t2i_r1", "t2i_r5", "t2i_r10", "t2i_medr", "t2i_meanr", "rsum"]
    assert got.lines()[0] == f"rsum: {got.rsum:.1f}" and got.lines()[1].startswith("Image to text: ")


def test_bad_input_is_refused():
    img, txt = torch.randn(3, 4), torch.randn(4, 4)
    with pytest.raises(ValueError, match=r"images \[2\] have none"):
        rank_metrics(img, txt, [0, 0, 1, 1])
    with pytest.raises(ValueError, match="outside"):
        rank_metrics(img, txt, [0, 1, 2, 3])
    with pytest.raises(ValueError, match=r"\[N, D\] and \[M, D\]"):
        rank_metrics(img, torch.randn(4, 5), [0, 1, 2, 2])
    with pytest.raises(ValueError, match="one image index per caption"):
        rank_metrics(img, txt, [0, 1, 2])
