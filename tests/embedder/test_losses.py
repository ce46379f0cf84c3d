"""Losses against slow per-triplet references (float64) and the paper's closed-form gradients."""
from __future__ import annotations

import math

import pytest
import torch

from embedder.losses.log_ratio import log_ratio_loss, log_ratio_loss_per_triplet
from embedder.losses.margin import MarginLoss
from embedder.losses.triplet import triplet_loss
from embedder.mining import (
    binary_triplet_mask,
    dense_triplet_mask,
    distance_weighted_triplets,
    triplets_from_mask,
)

F64 = torch.float64


def _case(seed, B=14, D=5, anchors=(0, 4, 4, 13), ties=True):
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(B, D, generator=g, dtype=F64)
    anchors = torch.tensor(anchors)
    if ties:  # small integers: ties and zero label distances
        label_dist = torch.randint(0, 5, (len(anchors), B), generator=g).to(F64)
    else:
        label_dist = torch.rand(len(anchors), B, generator=g, dtype=F64) * 3
    label_dist[torch.arange(len(anchors)), anchors] = 0.0
    return emb, anchors, label_dist


def _grad(fn, emb):
    x = emb.clone().requires_grad_(True)
    loss = fn(x)
    (g,) = torch.autograd.grad(loss, x)
    return loss.detach(), g


# ---------------------------------------------------------------- log-ratio


@pytest.mark.parametrize("seed,ties", [(0, True), (1, True), (2, False)])
def test_log_ratio_closed_form_and_mask_path_match_per_triplet_reference(seed, ties):
    emb, anchors, label_dist = _case(seed, ties=ties)
    mask = dense_triplet_mask(anchors, label_dist)
    ref_l, ref_g = _grad(lambda x: log_ratio_loss_per_triplet(x, anchors, label_dist), emb)
    for m in (None, mask):
        l, g = _grad(lambda x: log_ratio_loss(x, anchors, label_dist, mask=m), emb)
        assert torch.allclose(l, ref_l, rtol=1e-12, atol=0)
        assert torch.allclose(g, ref_g, rtol=1e-10, atol=1e-12)


@pytest.mark.parametrize("seed", [0, 2])
def test_log_ratio_euclidean_distance_matches_per_triplet_reference(seed):
    """The authors' released code uses ||f_a - f_b||, not its square: log-ratios in embedding space halve."""
    emb, anchors, label_dist = _case(seed, ties=seed == 0)
    ref_l, ref_g = _grad(lambda x: log_ratio_loss_per_triplet(x, anchors, label_dist, squared=False), emb)
    l, g = _grad(lambda x: log_ratio_loss(x, anchors, label_dist, squared=False), emb)
    assert torch.allclose(l, ref_l, rtol=1e-5, atol=0)  # eps sits inside the root here, outside there
    assert torch.allclose(g, ref_g, rtol=1e-5, atol=1e-8)
    squared_l, _ = _grad(lambda x: log_ratio_loss(x, anchors, label_dist), emb)
    assert not torch.allclose(l, squared_l, rtol=1e-3)
    coincident = emb.clone()
    coincident[1] = coincident[int(anchors[0])]  # a zero distance: finite loss and gradient
    l0, g0 = _grad(lambda x: log_ratio_loss(x, anchors, label_dist, squared=False), coincident)
    assert torch.isfinite(l0) and torch.isfinite(g0).all()


def _eq6to9_grad(emb, anchors, label_dist, mask, eps):
    """Eq. 6-9 summed over triplets, divided by their number (D + eps where the loss has it)."""
    grad = torch.zeros_like(emb)
    a_rows, i_idx, j_idx = triplets_from_mask(mask)
    for a_row, i, j in zip(a_rows.tolist(), i_idx.tolist(), j_idx.tolist()):
        a = int(anchors[a_row])
        f_a, f_i, f_j = emb[a], emb[i], emb[j]
        d_i = ((f_a - f_i) ** 2).sum() + eps
        d_j = ((f_a - f_j) ** 2).sum() + eps
        y_ratio = (label_dist[a_row, i] + eps) / (label_dist[a_row, j] + eps)
        l_prime = 4 * (torch.log(d_i / d_j) - torch.log(y_ratio))  # Eq. 9
        g_i = (f_i - f_a) / d_i * l_prime  # Eq. 6
        g_j = (f_a - f_j) / d_j * l_prime  # Eq. 7
        grad[i] += g_i
        grad[j] += g_j
        grad[a] += -g_i - g_j  # Eq. 8
    return grad / len(a_rows)


@pytest.mark.parametrize("anchors", [(3,), (0, 6)])
def test_log_ratio_gradient_is_eq_6_to_9(anchors):
    emb, anchors, label_dist = _case(5, B=8, D=3, anchors=anchors, ties=False)
    eps = 1e-6
    _, g = _grad(lambda x: log_ratio_loss(x, anchors, label_dist, eps=eps), emb)
    expected = _eq6to9_grad(emb, anchors, label_dist, dense_triplet_mask(anchors, label_dist), eps)
    assert torch.allclose(g, expected, rtol=1e-10, atol=1e-12)


def test_log_ratio_with_a_given_mask_uses_only_its_triplets():
    emb, anchors, label_dist = _case(3)
    g = torch.Generator().manual_seed(3)
    mask = binary_triplet_mask(anchors, torch.rand(label_dist.shape, generator=g) < 0.5)
    ref_l, ref_g = _grad(lambda x: log_ratio_loss_per_triplet(x, anchors, label_dist, mask=mask), emb)
    l, grad = _grad(lambda x: log_ratio_loss(x, anchors, label_dist, mask=mask), emb)
    assert torch.allclose(l, ref_l, rtol=1e-12) and torch.allclose(grad, ref_g, rtol=1e-10, atol=1e-12)


def test_log_ratio_is_zero_when_embedding_distances_are_proportional_to_label_distances():
    emb, anchors, _ = _case(4, ties=False)
    d = ((emb[None] - emb[anchors][:, None]) ** 2).sum(-1)
    loss = log_ratio_loss(emb, anchors, 7.0 * d, eps=0.0)
    assert abs(float(loss)) < 1e-20


def test_log_ratio_is_scale_free():
    emb, anchors, label_dist = _case(6, ties=False)
    a = log_ratio_loss(emb, anchors, label_dist, eps=0.0)
    b = log_ratio_loss(10.0 * emb, anchors, 0.1 * label_dist, eps=0.0)
    assert torch.allclose(a, b, rtol=1e-10)


def test_log_ratio_coincident_embeddings_give_finite_gradient():
    emb, anchors, label_dist = _case(7, anchors=(0,))
    emb[3] = emb[0]  # a neighbour exactly on the anchor
    emb[5] = emb[6]
    for m in (None, dense_triplet_mask(anchors, label_dist)):
        loss, g = _grad(lambda x: log_ratio_loss(x, anchors, label_dist, mask=m), emb)
        assert torch.isfinite(loss) and torch.isfinite(g).all()


def test_log_ratio_no_triplets_gives_attached_zero():
    emb, anchors, _ = _case(8, anchors=(2,))
    label_dist = torch.ones(1, emb.shape[0], dtype=F64)  # every neighbour ties
    x = emb.clone().requires_grad_(True)
    loss = log_ratio_loss(x, anchors, label_dist)
    loss.backward()
    assert loss.item() == 0.0 and torch.equal(x.grad, torch.zeros_like(x))


def test_log_ratio_float32_closed_form_agrees_with_float64():
    g = torch.Generator().manual_seed(9)
    emb = torch.randn(150, 128, generator=g, dtype=F64)
    anchors = torch.arange(0, 150, 19)
    label_dist = (torch.rand(len(anchors), 150, generator=g, dtype=F64) * 5).float().to(F64)
    ref = log_ratio_loss(emb, anchors, label_dist, mask=dense_triplet_mask(anchors, label_dist))
    got = log_ratio_loss(emb.float(), anchors, label_dist.float())
    assert got.dtype == torch.float32
    assert abs(float(got) - float(ref)) <= 1e-5 * float(ref)


def test_log_ratio_rejects_bad_input():
    emb, anchors, label_dist = _case(0)
    with pytest.raises(ValueError):
        log_ratio_loss(emb, anchors, label_dist[:, :-1])
    label_dist[0, 1] = math.nan
    with pytest.raises(ValueError):
        log_ratio_loss(emb, anchors, label_dist)


# ---------------------------------------------------------------- triplet


def triplet_per_triplet(emb, anchors, mask, margin):
    f = emb / emb.norm(dim=1, keepdim=True)
    a_rows, i_idx, j_idx = triplets_from_mask(mask)
    terms = [torch.clamp(((f[i] - f[anchors[a]]) ** 2).sum() - ((f[j] - f[anchors[a]]) ** 2).sum() + margin, min=0)
             for a, i, j in zip(a_rows.tolist(), i_idx.tolist(), j_idx.tolist())]
    return torch.stack(terms).mean()


@pytest.mark.parametrize("kind,margin", [("dense", 0.03), ("binary", 0.2)])
def test_triplet_matches_per_triplet_reference(kind, margin):
    emb, anchors, label_dist = _case(10)
    if kind == "dense":
        mask = dense_triplet_mask(anchors, label_dist)
    else:
        mask = binary_triplet_mask(anchors, label_dist <= 1)
    ref_l, ref_g = _grad(lambda x: triplet_per_triplet(x, anchors, mask, margin), emb)
    l, g = _grad(lambda x: triplet_loss(x, anchors, mask, margin), emb)
    assert ref_l > 0
    assert torch.allclose(l, ref_l, rtol=1e-12) and torch.allclose(g, ref_g, rtol=1e-10, atol=1e-12)


def test_triplet_zero_when_constraints_hold_with_margin():
    # Points on a circle at growing angles from the anchor: squared chord distances 2 - 2cos(t)
    # grow by more than the margin from one neighbour to the next.
    angles = torch.tensor([0.0, 0.3, 0.6, 0.9, 1.2, 1.5], dtype=F64)
    emb = torch.stack([torch.cos(angles), torch.sin(angles)], 1) * 3.0  # norm does not matter
    anchors = torch.tensor([0])
    label_dist = angles[None, :].clone()
    mask = dense_triplet_mask(anchors, label_dist)
    loss, g = _grad(lambda x: triplet_loss(x, anchors, mask, margin=0.03), emb)
    assert float(loss) == 0.0 and torch.equal(g, torch.zeros_like(g))
    assert float(triplet_loss(emb, anchors, mask, margin=0.5)) > 0


def test_triplet_averages_over_all_mined_triplets_not_only_active_ones():
    angles = torch.tensor([0.0, 0.3, 0.6, 0.9], dtype=F64)
    emb = torch.stack([torch.cos(angles), torch.sin(angles)], 1)
    anchors = torch.tensor([0])
    label_dist = torch.tensor([[0.0, 1.0, 2.0, 3.0]], dtype=F64)
    emb[2] = emb[3]  # only triplet (0, 2, 3) violates: D equal, hinge = margin
    mask = dense_triplet_mask(anchors, label_dist)
    assert int(mask.sum()) == 3
    assert float(triplet_loss(emb, anchors, mask, margin=0.03)) == pytest.approx(0.03 / 3, rel=1e-12)


# ---------------------------------------------------------------- margin


def margin_reference(emb, anchors, a, p, n, beta, margin, nu):
    """Wu et al.: sum of [margin + y (d - beta)]_+ over (a,p) and (a,n) pairs / nonzero pairs + nu beta."""
    f = emb / emb.norm(dim=1, keepdim=True)
    total, active = 0.0, 0
    for ar, pi, ni in zip(a.tolist(), p.tolist(), n.tolist()):
        fa = f[int(anchors[ar])]
        pos = max(0.0, float((fa - f[pi]).norm()) - beta + margin)
        neg = max(0.0, beta - float((fa - f[ni]).norm()) + margin)
        total += pos + neg
        active += (pos > 0) + (neg > 0)
    return total / active + nu * beta


@pytest.mark.parametrize("nu", [0.0, 0.1])
def test_margin_loss_matches_reference_on_the_sampled_triplets(nu):
    emb, anchors, label_dist = _case(11, B=30, D=8, anchors=(0, 9))
    positive = label_dist <= 1
    module = MarginLoss(beta_init=1.2, margin=0.2, nu=nu)
    loss = module(emb, anchors, positive, generator=torch.Generator().manual_seed(5))
    a, p, n = distance_weighted_triplets(emb, anchors, positive, torch.Generator().manual_seed(5))
    assert loss.item() == pytest.approx(margin_reference(emb, anchors, a, p, n, 1.2, 0.2, nu), rel=1e-6)


def test_margin_loss_learns_beta_and_is_seeded():
    emb, anchors, label_dist = _case(12, B=30, D=8, anchors=(3,))
    positive = label_dist <= 1
    module = MarginLoss()
    assert any(p is module.beta for p in module.parameters())
    assert module.beta.item() == pytest.approx(1.2)
    x = emb.clone().requires_grad_(True)
    loss = module(x, anchors, positive, generator=torch.Generator().manual_seed(0))
    loss.backward()
    assert module.beta.grad is not None and float(module.beta.grad.abs().sum()) > 0
    assert torch.isfinite(x.grad).all()
    again = module(emb, anchors, positive, generator=torch.Generator().manual_seed(0))
    assert again.item() == loss.item()


def test_margin_loss_without_positives_is_attached_zero():
    emb = torch.randn(6, 4, dtype=F64, requires_grad=True)
    loss = MarginLoss()(emb, torch.tensor([0]), torch.zeros(1, 6, dtype=torch.bool))
    loss.backward()
    assert loss.item() == 0.0
