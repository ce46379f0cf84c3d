"""Gordo & Larlus's textual losses beside a stage-one row (issue #67): Eq. 2 and Eq. 3 against a loop, the row's
loss unchanged when they are off, the WSABIE-like row (Eq. 2 alone), the config's one-line refusals, and a tiny
caption study training (V, V), (V+T) and WSABIE-like rows (the text tower kept in the checkpoints of the rows with
it) and their Table 2 (embedder.g17_table)."""
import json
from types import SimpleNamespace

import numpy as np
import pytest
import torch
from scipy.sparse import csr_matrix

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError
from embedder.config import TextLossConfig
from embedder.losses.method_loss import MethodLoss
from embedder.losses.text_side import TextSide
from embedder import g17_table
from embedder.retrieval_report import load_rows
from embedder.rows import run_study
from tests.embedder.test_caption_study import tiny_cfg


def bags(rng, n=10, v=7):
    x = rng.random((n, v)) * (rng.random((n, v)) < 0.6) + np.eye(n, v) * 1e-3
    return csr_matrix(x / np.linalg.norm(x, axis=1, keepdims=True))


def test_eq2_and_eq3_against_a_loop():
    rng, g = np.random.default_rng(0), torch.Generator().manual_seed(0)
    torch.manual_seed(0)
    side = TextSide(TextLossConfig(eq2=1.0, eq3=0.5, margin=0.3, per_pair=2), bags(rng), 4)
    emb, items = torch.randn(6, 4, generator=g), torch.tensor([9, 3, 0, 7, 2, 5])
    anchors, positive = torch.tensor([0, 3]), torch.rand(2, 6, generator=g) < 0.5
    phi = torch.nn.functional.normalize(emb, dim=1)
    theta = side.texts(items, "cpu").detach()

    def term(q_of, k_of):
        kept = []
        for r, a in enumerate(anchors.tolist()):
            for i in range(6):
                if i != a and positive[r, i]:
                    h = sorted((0.5 * max(0.0, 0.3 - float(q_of(a) @ k_of(i)) + float(q_of(a) @ k_of(j)))
                                for j in range(6) if j != a and not positive[r, j]), reverse=True)
                    kept += h[:2]
        return np.mean(kept) if kept else 0.0
    want = term(lambda a: phi[a], lambda i: theta[i]) + 0.5 * term(lambda a: theta[a], lambda i: phi[i])
    got = side(emb, anchors, positive, items)
    assert got.item() == pytest.approx(want, rel=1e-5)
    got.backward()
    assert side.tower.weight.grad.abs().sum() > 0


def test_the_rows_loss_is_unchanged_without_text_and_absent_in_the_wsabie_row():
    g = torch.Generator().manual_seed(1)
    emb, anchors = torch.randn(8, 4, generator=g), torch.tensor([1, 5])
    positive = torch.rand(2, 8, generator=g) < 0.4
    label_dist = torch.rand(2, 8, generator=g)
    train = SimpleNamespace()
    row = SimpleNamespace(name="V", loss="g17_hinge", mining="binary", margin=0.1, loss_args={},
                          text=TextLossConfig())
    plain = MethodLoss(row, train, 0)(emb, anchors, label_dist, positive)
    no_text = SimpleNamespace(**{k: v for k, v in vars(row).items() if k != "text"})  # a row from before
    assert plain.item() == MethodLoss(no_text, train, 0)(emb, anchors, label_dist, positive).item()
    torch.manual_seed(2)
    wsabie = MethodLoss(SimpleNamespace(**{**vars(row), "text": TextLossConfig(visual=0.0, eq2=1.0)}), train, 0,
                        bags(np.random.default_rng(1), 8), 4)
    items = torch.arange(8)
    torch.manual_seed(2)
    side = TextSide(TextLossConfig(visual=0.0, eq2=1.0), bags(np.random.default_rng(1), 8), 4)
    assert wsabie(emb, anchors, label_dist, positive, items).item() == pytest.approx(
        side(emb, anchors, positive, items).item())


def test_text_losses_need_the_tfidf_space_and_weights_that_train(tmp_path):
    with pytest.raises(CapawareError, match=r"methods\[0\].text.*tf-idf caption bags.*captions.space: tfidf"):
        tiny_cfg(tmp_path, "methods=[{name: VT, loss: g17_hinge, margin: 0.1, text: {eq2: 1.0}}]")
    with pytest.raises(CapawareError, match=r"methods\[0\].text: every loss weight is 0"):
        tiny_cfg(tmp_path, "captions.space=tfidf", "methods=[{name: X, loss: g17_hinge, text: {visual: 0.0}}]")


@pytest.fixture(scope="module")
def joint_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("g17")
    cfg = tiny_cfg(tmp, "captions.space=tfidf", "train.epochs=0.2", "model.init=none",  # no class pretraining
                   "methods=[{name: V, loss: g17_hinge, margin: 0.1}, "
                   "{name: VT, loss: g17_hinge, margin: 0.1, text: {eq2: 1.0, eq3: 1.0}}, "
                   "{name: WSABIE, loss: g17_hinge, margin: 0.1, text: {visual: 0.0, eq2: 1.0}}]")
    return tmp, run_study(cfg, progress=False)


def test_a_tiny_caption_study_trains_visual_and_joint_rows(joint_study):
    tmp, ret_dir = joint_study
    rows = load_rows(ret_dir)
    assert {"V", "VT", "WSABIE"} <= set(rows)
    for name, has_tower in (("v", False), ("vt", True), ("wsabie", True)):
        state = load_checkpoint(tmp / "run" / "methods" / name / "model.pt")
        keys = [k for k in state["criterion"] if k.startswith("text.tower")]
        assert bool(keys) == has_tower, name


def test_the_g17_table_names_its_rows_as_the_paper_and_scores_them_against_the_proxy(joint_study):
    tmp, ret_dir = joint_study
    g17_table.main([str(tmp / "run"), "--r-max", "6"])
    out = json.loads((tmp / "run" / "results" / "g17_table.json").read_text())
    names = [r["row"] for r in out["rows"]]
    assert names[0] == "Random (x5)" and names[1].startswith("Visual baseline (, V)")
    assert names[2:] == ["V (V, V)", "VT (V+T, V)", "VT (V+T, V+T)", "WSABIE WSABIE-like (V+T, V)",
                         "WSABIE (V+T, V+T)"]
    track_rows = {r["row"]: r for r in out["rows"]}
    assert 0.0 < track_rows["V (V, V)"]["ndcg_auc"] <= 1.0 and len(track_rows["V (V, V)"]["ndcg"]) == 6
    assert track_rows["Random (x5)"]["ndcg_auc_sd"] > 0 and abs(track_rows["Random (x5)"]["pcc_auc"]) < 0.5
    assert (tmp / "run" / "results" / "g17_table.md").read_text().count("\n") == len(names) + 2


def test_a_query_with_text_modifiers_ranks_the_gallery_as_computed_by_hand(joint_study, capsys):
    from embedder import query

    tmp, _ = joint_study
    row = query.JointRow.load(tmp / "run" / "methods" / "vt" / "model.pt")
    images = sorted((tmp / "captions").rglob("*.png"))[:7]
    image, gallery = images[0], images[1:]
    word = row.vocab[0]
    ranked = query.rank_gallery(row, image, gallery, add=[word])
    with torch.no_grad():  # by hand: normalise(normalise(phi_q) + theta(word)) against each image's phi
        phi = torch.nn.functional.normalize(row.model(row.images(images)), dim=1)
        concept = torch.nn.functional.normalize(row.tower.weight[0], dim=0)
        q = torch.nn.functional.normalize(phi[0] + concept, dim=0)
        want = sorted(zip((phi[1:] @ q).tolist(), gallery), key=lambda t: -t[0])
    assert [p for p, _ in ranked] == [p for _, p in want]
    assert [s for _, s in ranked] == pytest.approx([s for s, _ in want], abs=1e-5)
    query.main(["--model", str(tmp / "run" / "methods" / "vt" / "model.pt"), "--image", str(image), "--gallery",
                str(image.parent), "--add", word, "--top", "3"])
    assert len(capsys.readouterr().out.strip().splitlines()) == 3
    with pytest.raises(CapawareError, match="not in the caption vocabulary"):
        query.rank_gallery(row, image, gallery, add=["zzzqqq"])
    with pytest.raises(CapawareError, match="no text side"):
        query.JointRow.load(tmp / "run" / "methods" / "v" / "model.pt")


def test_the_pool_triplets_take_eq_1_to_3_on_the_given_triplets():
    """What a pool-mined step (train.sampler: g17_pool) computes: each equation's mean hinge on the drawn triplets."""
    rng, g = np.random.default_rng(3), torch.Generator().manual_seed(3)
    torch.manual_seed(3)
    text = TextLossConfig(visual=0.5, eq2=1.0, eq3=2.0, margin=0.3)
    row = SimpleNamespace(name="VT", loss="g17_hinge", mining="binary", margin=0.2, loss_args={}, text=text)
    loss = MethodLoss(row, SimpleNamespace(sampler="g17_pool"), 0, bags(rng, 10), 4)
    emb, items = torch.randn(5, 4, generator=g), torch.tensor([2, 4, 5, 7, 9])
    trip = torch.tensor([[0, 1, 2], [3, 4, 0], [1, 0, 4]])
    phi = torch.nn.functional.normalize(emb, dim=1)
    theta = loss.text.texts(items, "cpu").detach()

    def mean(q, p, n, m):
        return np.mean([0.5 * max(0.0, m - float(q[a] @ p[b]) + float(q[a] @ n[c])) for a, b, c in trip.tolist()])
    want = 0.5 * mean(phi, phi, phi, 0.2) + 1.0 * mean(phi, theta, theta, 0.3) + 2.0 * mean(theta, phi, phi, 0.3)
    assert loss.triplets(emb, trip, items).item() == pytest.approx(want, rel=1e-5)
    assert loss.loss.mined.triplets.shape == (0, 3)  # the pool's candidates, empty until the first mining
