"""Rank-N-Contrast (embedder/losses/rank_n_contrast.py) against a plain loop over the formula (float64),
and the row's wiring: config key, training dispatch, study configs, seed-table verdicts."""
from __future__ import annotations

import json

import pytest
import torch

from capcore.errors import CapawareError
from embedder.config import load_config
from embedder.losses.rank_n_contrast import rank_n_contrast_loss

F64 = torch.float64
RNC = "L(RnC)"
STUDY = "studies/stage_one_seeds/configs"  # the study profile's configs
RNC_CONFIGS = "studies/rank_n_contrast/configs"  # the RnC sweeps and rows alone


def per_pair(emb, anchors, label_dist, temperature=2.0):
    """Zha et al.'s l_aj written out: one Python iteration per (anchor, j, k)."""
    terms = []
    for a, p in enumerate(anchors.tolist()):
        s = [-torch.linalg.vector_norm(emb[p] - emb[k]) / temperature for k in range(len(emb))]
        for j in range(len(emb)):
            if j == p:
                continue
            denominator = sum(torch.exp(s[k]) for k in range(len(emb))
                              if k != p and label_dist[a, k] >= label_dist[a, j])
            terms.append(-torch.log(torch.exp(s[j]) / denominator))
    return torch.stack(terms).mean() if terms else emb.sum() * 0.0


def case(seed, anchors, B=12, D=5, integer_labels=True):
    """Embeddings and label distances with ties: |y_a - y_b| of small integer labels, or a random matrix of
    small integers (ties with no label geometry behind them)."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(B, D, generator=g, dtype=F64)
    anchors = torch.tensor(anchors)
    if integer_labels:
        y = torch.randint(0, 5, (B,), generator=g).to(F64)
        label_dist = (y[anchors][:, None] - y[None, :]).abs()
    else:
        label_dist = torch.randint(0, 4, (len(anchors), B), generator=g).to(F64)
    return emb, anchors, label_dist


ANCHOR_SETS = [(3,), (0, 4, 4, 11), tuple(range(12))]  # one anchor, some (one repeated), every sample


@pytest.mark.parametrize("anchors", ANCHOR_SETS)
@pytest.mark.parametrize("seed,integer_labels,tau", [(0, True, 2.0), (1, False, 0.5), (2, True, 4.0)])
def test_matches_the_formula_with_tied_label_distances(anchors, seed, integer_labels, tau, one_thread):
    emb, anchors, label_dist = case(seed, anchors, integer_labels=integer_labels)
    assert len(set(label_dist[0].tolist())) < label_dist.shape[1] - 1  # the rows do tie
    fast = rank_n_contrast_loss(emb, anchors, label_dist, temperature=tau)
    assert fast.item() == pytest.approx(per_pair(emb, anchors, label_dist, tau).item(), abs=1e-6)


@pytest.mark.parametrize("anchors", ANCHOR_SETS)
def test_gradient_matches_the_formulas(anchors, one_thread):
    emb, anchors, label_dist = case(3, anchors)
    grads = []
    for fn in (rank_n_contrast_loss, per_pair):
        x = emb.clone().requires_grad_(True)
        (g,) = torch.autograd.grad(fn(x, anchors, label_dist, 1.0), x)
        grads.append(g)
    torch.testing.assert_close(grads[0], grads[1], rtol=1e-6, atol=1e-9)


def test_gradcheck(one_thread):
    emb, anchors, label_dist = case(4, (1, 3, 3), B=7, D=3)
    x = emb.clone().requires_grad_(True)
    assert torch.autograd.gradcheck(lambda e: rank_n_contrast_loss(e, anchors, label_dist, 2.0), (x,))


def test_an_embedding_ordered_as_the_labels_beats_a_shuffled_one(one_thread):
    g = torch.Generator().manual_seed(5)
    y = torch.randperm(20, generator=g).to(F64)
    anchors = torch.arange(20)
    label_dist = (y[:, None] - y[None, :]).abs()
    ordered = torch.zeros(20, 4, dtype=F64)
    ordered[:, 0] = 3.0 * y  # embedding distances are label distances, scaled: the same order
    loss = rank_n_contrast_loss(ordered, anchors, label_dist)
    for _ in range(5):
        shuffled = ordered[torch.randperm(20, generator=g)]
        assert loss < rank_n_contrast_loss(shuffled, anchors, label_dist)


def test_float32_agrees_with_float64_and_far_embeddings_stay_finite(one_thread):
    emb, anchors, label_dist = case(6, tuple(range(12)))
    for scale in (1.0, 100.0):  # logits down to about -1000: no exp underflows into the denominators
        x64 = (emb * scale).requires_grad_(True)
        x32 = (emb * scale).float().requires_grad_(True)
        l64, l32 = rank_n_contrast_loss(x64, anchors, label_dist), rank_n_contrast_loss(x32, anchors, label_dist)
        (g64,), (g32,) = torch.autograd.grad(l64, x64), torch.autograd.grad(l32, x32)
        assert torch.isfinite(g32).all() and l32.item() == pytest.approx(l64.item(), rel=1e-5)
        torch.testing.assert_close(g32.double(), g64, rtol=1e-3, atol=1e-5 * float(g64.abs().max()))


@pytest.mark.parametrize("spread", [3.0, 300.0, 3000.0])  # the float64 prefix sums, and the logcumsumexp fallback
def test_log_prefix_sums_equal_logcumsumexp_in_values_and_gradients(spread, one_thread):
    from embedder.losses.rank_n_contrast import log_prefix_sums

    g = torch.Generator().manual_seed(7)
    for dtype in (torch.float32, F64):
        x = (torch.rand(5, 40, generator=g, dtype=F64) * -spread).to(dtype)
        w = torch.rand(5, 40, generator=g, dtype=F64).to(dtype)
        ours, ref = x.clone().requires_grad_(True), x.double().requires_grad_(True)  # reference in float64
        a, b = log_prefix_sums(ours), torch.logcumsumexp(ref, dim=1)
        assert a.dtype == dtype
        torch.testing.assert_close(a, b.to(dtype))
        (ga,), (gb,) = torch.autograd.grad((a * w).sum(), ours), torch.autograd.grad((b * w.double()).sum(), ref)
        torch.testing.assert_close(ga, gb.to(dtype))


def test_no_pairs_gives_attached_zero_and_bad_input_is_rejected():
    x = torch.randn(1, 3, requires_grad=True)
    loss = rank_n_contrast_loss(x, torch.tensor([0]), torch.zeros(1, 1))
    loss.backward()
    assert loss.item() == 0.0 and x.grad is not None
    emb, anchors, label_dist = case(7, (0, 1))
    for bad, match in (({"temperature": 0.0}, "temperature"), ({"label_dist": label_dist[:, :-1]}, "label_dist"),
                       ({"label_dist": label_dist.masked_fill(label_dist == 0, float("nan"))}, "NaN")):
        kwargs = {"label_dist": label_dist, **bad}
        with pytest.raises(ValueError, match=match):
            rank_n_contrast_loss(emb, anchors, **kwargs)


# ---------------------------------------------------------------- the row


def test_the_row_expands_trains_raw_embeddings_and_validates_its_temperature(tmp_path):
    from embedder.config import LATER_ROWS, PAPER_ROWS
    from embedder.config import TrainConfig
    from embedder.losses.method_loss import MethodLoss

    assert RNC in LATER_ROWS and RNC not in PAPER_ROWS  # beside the paper's rows, not one of them
    path = tmp_path / "rnc.yaml"
    path.write_text(f'methods:\n  - {{row: "{RNC}", lr: 0.01}}\n  - {{row: "{RNC}", name: hot, temperature: 0.5}}\n')
    default, hot = load_config(path).methods
    assert (default.name, default.loss, default.mining, default.temperature) == (RNC, "rank_n_contrast", "dense", 2.0)
    assert (hot.name, hot.temperature) == ("hot", 0.5)
    criterion = MethodLoss(hot, TrainConfig(log_ratio_eps=1e-6), seed=0)
    emb, anchors, label_dist = case(8, (0, 5))
    assert not criterion.normalised  # retrieval uses the raw embeddings the loss measured
    assert criterion(emb, anchors, label_dist, None).item() == pytest.approx(
        rank_n_contrast_loss(emb, anchors, label_dist, temperature=0.5).item())
    for temperatures, bad in (((2.0, 0), 1), ((-2.0, 2.0), 0)):
        path.write_text("methods:\n" + "".join(f'  - {{row: "{RNC}", temperature: {t}}}\n' for t in temperatures))
        with pytest.raises(CapawareError) as err:
            load_config(path)
        assert f"methods[{bad}].temperature: must be > 0" in str(err.value) and str(path) in str(err.value)
    with pytest.raises(CapawareError, match="method.temperature"):  # checked where the row's loss reads it
        load_config(None, ["method.loss=rank_n_contrast", "method.temperature=0"])


def test_temperature_is_part_of_a_rows_fingerprint():
    """Every schema field that is not bookkeeping enters the fingerprint (capcore.fingerprint's one rule):
    a run at another temperature never resumes this one's checkpoint."""
    from embedder.train import method_fingerprint

    cfg = load_config(f"{STUDY}/study_pose.yaml")
    for m in cfg.methods:
        other = m.copy()
        other.temperature = 7.0
        assert method_fingerprint(cfg, other) != method_fingerprint(cfg, m), m.name


@pytest.mark.parametrize("track", ["pose", "layout", "caption"])
def test_the_study_trains_the_demo_rows_then_rnc(track):
    """The study configs restate the demo's rows (lists replace, they do not merge): the same rows and
    lrs, then the RnC row last (so the paper's rows keep their order and files)."""
    demo = load_config(f"configs/demo/demo_{track}.yaml").methods
    study = load_config(f"{STUDY}/study_{track}.yaml").methods
    assert list(study[:-1]) == list(demo) and study[-1].loss == "rank_n_contrast" and study[-1].name == RNC
    sweep = load_config(f"{RNC_CONFIGS}/study_{track}_rnc_sweep.yaml")
    assert {0.5, 1.0, 2.0, 4.0} <= {m.temperature for m in sweep.methods}  # and one more where the best sat at an edge
    assert {m.loss for m in sweep.methods} == {"rank_n_contrast"} and len(sweep.methods) in (4, 5)
    assert {m.lr for m in sweep.methods} == {study[-1].lr}  # the temperature at the row's study lr
    assert sweep.data.synthetic.seed != load_config(f"{STUDY}/study_{track}.yaml").data.synthetic.seed


def test_seed_tables_pair_rnc_with_log_ratio_outside_the_claim(tmp_path):
    from studies.stage_one_seeds.retrieval_seeds import REFERENCE, beside_lines, claim_line, main, paired_table
    from studies.stage_one_seeds.stage1_seeds import comparison

    assert comparison(load_config(f"{STUDY}/study_pose.yaml")) == ["--reference", REFERENCE, "--beside", RNC]
    seeds = [{REFERENCE: [0.6], "TD": [0.5], RNC: [0.7], "Oracle": [1.0]},
             {REFERENCE: [0.7], "TD": [0.6], RNC: [0.8], "Oracle": [1.0]}]
    paths = []
    for i, rows in enumerate(seeds):
        (tmp_path / f"s{i}").mkdir()
        (tmp_path / f"s{i}" / "retrieval.json").write_text(
            json.dumps({"rows": {n: {"ndcg": v} for n, v in rows.items()}}))
        paths.append(tmp_path / f"s{i}")
    md, summary = paired_table(paths, (1,), REFERENCE, verdict_k=1, beside=[RNC])
    assert [ln.split(" | ")[0] for ln in md.splitlines()
            if ln.startswith("| ") and "minus" not in ln] == ["| TD", f"| {RNC}"]
    assert summary[RNC] == {"mean": pytest.approx(-0.1), "per_seed": pytest.approx([-0.1, -0.1]),
                            "verdict": "behind", "beside": True}
    assert "leads every other row" in claim_line(REFERENCE, summary, k=1)  # RnC ahead, yet the claim holds
    assert beside_lines(REFERENCE, summary, k=1)[RNC].startswith(
        f"Beside the claim: {REFERENCE} is behind {RNC} at nDCG@1")
    main([*map(str, paths), "--k", "1", "--beside", RNC, "--out", str(tmp_path / "out")])
    written = json.loads((tmp_path / "out.json").read_text())
    assert written["verdict"].startswith("Verdict: ") and "behind L(RnC)" in written["beside"][RNC]


@pytest.mark.parametrize("track", ["pose", "layout", "caption", "pose_dims"])
def test_the_rnc_pipeline_trains_the_studys_own_rows(track):
    """studies/rank_n_contrast/configs/pipeline_rnc.yaml: log-ratio + dense and RnC exactly as the study trains
    them, in the study's folders, so `make study` reuses those runs."""
    study = load_config(f"{STUDY}/study_{track}.yaml")
    rnc = load_config(f"{RNC_CONFIGS}/rnc_{track}.yaml")
    keep = {m.name: m for m in study.methods}
    assert rnc.out_dir == study.out_dir and rnc.dims == study.dims
    assert [m for m in rnc.methods] == [keep[m.name] for m in rnc.methods]
    assert {"L(Log-ratio)+M(Dense)", RNC} <= {m.name for m in rnc.methods}
