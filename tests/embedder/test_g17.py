"""Gordo & Larlus 2017 (issue #67): Eq. 1-3 on hand-worked triplets, the batch loss against a loop, the k-NN
relevance against a brute-force sort, NDCG@R and PCC@R against scikit-learn's ndcg_score and scipy's pearsonr on
random scores, and the mining pool drawing only what its rule allows (the kept triplets the largest)."""
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.sparse import csr_matrix
from scipy.stats import pearsonr
from sklearn.metrics import ndcg_score

from embedder import g17_pool, proxy_ranking
from embedder.losses.base import LossBatch
from embedder.losses.g17 import G17Loss, batch_hinges, half_hinge
from embedder.losses.registry import loss_entry

Q, P, N = torch.tensor([1.0, 0.0]), torch.tensor([0.6, 0.8]), torch.tensor([0.8, 0.6])


def test_eq_1_to_3_by_hand():
    assert half_hinge(Q, P, N, 0.1).item() == pytest.approx(0.5 * (0.1 - 0.6 + 0.8))  # violated: .15
    assert half_hinge(Q, N, P, 0.1).item() == 0.0  # satisfied by more than the margin
    assert half_hinge(Q, N, P, 0.3).item() == pytest.approx(0.5 * (0.3 - 0.8 + 0.6))  # inside the margin: .05
    theta_pos, theta_neg = torch.tensor([0.0, 1.0]), torch.tensor([1.0, 0.0])  # Eq. 2: an image query, two texts
    assert half_hinge(Q, theta_pos, theta_neg, 0.2).item() == pytest.approx(0.5 * (0.2 - 0.0 + 1.0))
    assert half_hinge(theta_pos, P, N, 0.2).item() == pytest.approx(0.5 * (0.2 - 0.8 + 0.6))  # Eq. 3: a text query


def test_the_batch_keeps_each_pairs_hardest_irrelevant_images():
    g = torch.Generator().manual_seed(0)
    emb = torch.randn(9, 4, generator=g)
    anchors = torch.tensor([0, 4])
    positive = torch.rand(2, 9, generator=g) < 0.4
    f = torch.nn.functional.normalize(emb, dim=1)
    want = []
    for a_row, a in enumerate(anchors.tolist()):
        for i in range(9):
            if i == a or not positive[a_row, i]:
                continue
            h = sorted((0.5 * max(0.0, 0.2 - float(f[a] @ f[i]) + float(f[a] @ f[j]))
                        for j in range(9) if j != a and not positive[a_row, j]), reverse=True)
            want += h[:3]
    got = batch_hinges(emb, anchors, positive, 0.2, per_pair=3)
    assert sorted(got.tolist()) == pytest.approx(sorted(want))
    entry = loss_entry("g17_hinge")
    loss = G17Loss(SimpleNamespace(margin=0.2), {**entry.args, "per_pair": 3}, None)
    emb.requires_grad_(True)
    value = loss(LossBatch(emb, anchors, torch.zeros(2, 9), positive, None, g))
    value.backward()
    assert value.item() == pytest.approx(float(np.mean(want))) and emb.grad.abs().sum() > 0
    assert entry.normalised and not entry.mined and entry.args["per_pair"] == 100


def unit_rows(rng, n, v=12):
    x = rng.random((n, v)) * (rng.random((n, v)) < 0.4)
    x[:, 0] += 1e-3  # no empty caption
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def test_knn_relevance_is_a_brute_force_sort_without_the_image_itself():
    x = unit_rows(np.random.default_rng(0), 40)
    x[7] = x[3]  # a tie: the lower index first
    got = proxy_ranking.knn_relevant(csr_matrix(x), 5, block=16)
    sim = x @ x.T
    for i in range(40):
        others = [j for j in range(40) if j != i]
        want = sorted(others, key=lambda j: (-sim[i, j], j))[:5]
        assert got[i].tolist() == want
    assert np.array_equal(got, proxy_ranking.knn_relevant(x, 5))  # dense rows, one block


def test_ndcg_and_pcc_against_scikit_learn_and_scipy():
    rng = np.random.default_rng(1)
    scores, rel = rng.normal(size=(6, 30)), rng.random((6, 30))
    exclude = np.arange(6) * 5
    curves = proxy_ranking.proxy_curves(scores, rel, 10, exclude)
    keep = [np.delete(np.arange(30), e) for e in exclude]  # the query removed from its results
    for r in (1, 4, 10):
        want = np.mean([ndcg_score(rel[q, keep[q]][None], scores[q, keep[q]][None], k=r) for q in range(6)])
        assert curves.ndcg[r - 1] == pytest.approx(want)
    for r in (2, 5, 10):
        tops = [keep[q][np.argsort(-scores[q, keep[q]], kind="stable")[:r]] for q in range(6)]
        want = np.mean([pearsonr(scores[q, t], rel[q, t])[0] for q, t in enumerate(tops)])
        assert curves.pcc[r - 1] == pytest.approx(want)
    assert np.isnan(curves.pcc[0])
    assert curves.ndcg_auc == pytest.approx((curves.ndcg[0] / 2 + curves.ndcg[1:-1].sum() + curves.ndcg[-1] / 2) / 9)
    perfect = proxy_ranking.proxy_curves(rel, rel, 10)
    assert np.allclose(perfect.ndcg, 1.0) and np.allclose(perfect.pcc[1:], 1.0)


def test_the_pool_draws_only_what_its_rule_allows_and_keeps_the_largest_losses():
    rng = np.random.default_rng(2)
    relevant = proxy_ranking.knn_relevant(unit_rows(rng, 60), 6)
    pool = g17_pool.draw_pool(relevant, n_queries=8, per_query=3, rng=np.random.default_rng(3))
    assert len(set(pool.queries.tolist())) == 8 and len(set(pool.images.tolist())) == len(pool.images)
    assert np.array_equal(pool.images[:8], pool.queries)
    emb = torch.randn(len(pool.images), 5, generator=torch.Generator().manual_seed(4))
    kept = g17_pool.candidates(emb, pool, relevant, margin=0.5, per_pair=4)
    f = torch.nn.functional.normalize(emb, dim=1)
    at = {int(img): i for i, img in enumerate(pool.images)}
    assert len(kept) > 0
    for q, p, n in kept:
        assert q in pool.queries and p in relevant[q] and n not in relevant[q] and n != q and n in at
    for q in pool.queries:
        for p in set(relevant[q].tolist()) & set(at):
            mine = [n for qq, pp, n in kept if qq == q and pp == p]
            loss = {n: half_hinge(f[at[q]], f[at[p]], f[at[n]], 0.5).item() for n in at
                    if n != q and n not in relevant[q]}
            best = sorted((v for v in loss.values() if v > 0), reverse=True)[:4]
            assert sorted((loss[n] for n in mine), reverse=True) == pytest.approx(best)
