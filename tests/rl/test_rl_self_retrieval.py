"""Self-retrieval SCST (issue #66; Liu et al. 2018): the reward door (rl/rewards.py) and its two terms against
hand-worked numbers, the signature that names the retrieval term, one-line refusals, and an SCST run on a tiny
captioner with a joint model trained on the same files: it runs, signs, and a kill then resume gives the unbroken
run's checkpoints."""
import json
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch
from torch import nn

from capcore.errors import CapawareError
from rl.config import load_scst_config
from rl.rewards import UNLABELED, Captions, NgramTerm, Reward, SelfRetrievalTerm, StepImages
from rl.signature import SCSTSignature
from tests.rl.test_rl_scst import rl_overrides, toy_reward, xe_run  # noqa: F401  (xe_run: a fixture)

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")  # the killed run's subprocess runs on one thread too
MARGIN = 0.2


class LookupSpace(nn.Module):
    """A joint space whose encoders are lookups, so that every cosine is known by hand: image i's fc row is its
    embedding, and a caption's embedding is the row of ``words`` named by its first word id."""

    def __init__(self, words: torch.Tensor):
        super().__init__()
        self.words = words
        self.image = nn.Module()
        self.image.source = "fc"

    def embed_images(self, feats):
        return nn.functional.normalize(feats, dim=1)

    def embed_captions(self, ids):
        return self.words[ids[:, 0]]


def two_images():
    e = torch.eye(2)
    # word 1 names image 0 (its vector), word 2 names image 1, word 3 lies between them (cos .6 and .8)
    words = torch.stack([torch.zeros(2), e[0], e[1], torch.tensor([0.6, 0.8])])
    return LookupSpace(words), StepImages(fc=e.clone(), att=e[:, None].clone())


def test_the_retrieval_term_rewards_the_caption_that_names_its_image():
    model, images = two_images()
    term = SelfRetrievalTerm(model, weight=1.0, margin=MARGIN, hardest=True)
    # three captions of image 0: "1" names it, "2" names image 1, "3" is nearer image 1 than its own
    caps = Captions(torch.tensor([[1, 0], [2, 0], [3, 0]]), np.zeros(3, int), np.zeros(3, int))
    (r,) = term([caps], images)
    # hinge [m + s(c, v1) - s(c, v0)]_+: "1": .2 + 0 - 1 -> 0; "2": .2 + 1 - 0 = 1.2; "3": .2 + .8 - .6 = .4
    assert r.tolist() == pytest.approx([0.0, -1.2, -0.4])
    scaled = SelfRetrievalTerm(model, weight=4.0, margin=MARGIN, hardest=True)([caps], images)[0]
    assert scaled.tolist() == pytest.approx([0.0, -4.8, -1.6])  # alpha scales it, the sign stays


def test_the_retrieval_term_scores_each_group_against_the_same_images():
    model, images = two_images()
    term = SelfRetrievalTerm(model, weight=1.0, margin=MARGIN, hardest=False)
    samples = Captions(torch.tensor([[2, 0], [2, 0]]), np.array([0, 1]), np.array([0, 1]))
    greedy = Captions(torch.tensor([[3, 1, 0]]), np.array([UNLABELED]), np.array([1]))  # a longer row, unlabeled
    got = term([samples, greedy], images)
    # "2" for image 0: .2 + 1 - 0 = 1.2; "2" for image 1: .2 + 0 - 1 -> 0; "3" for image 1: .2 + .6 - .8 = 0
    assert [g.tolist() for g in got] == [pytest.approx([-1.2, 0.0]), pytest.approx([0.0])]


def test_unlabeled_images_get_no_cider_d_term():
    cider = toy_reward()
    term = NgramTerm(cider)
    seq = torch.tensor([[1, 2, 0], [3, 4, 0], [1, 2, 0], [2, 1, 0]])
    label_ix = np.array([0, 1, UNLABELED, 2])
    (got,) = term([Captions(seq, label_ix, np.arange(4))], None)
    want = cider(seq[[0, 1, 3]].numpy(), np.array([0, 1, 2]))
    assert got[2] == 0.0 and got[[0, 1, 3]].tolist() == pytest.approx(want.tolist())
    assert want.min() > 0  # the labeled captions do earn CIDEr-D (each is one of its image's references)


def test_the_reward_sums_its_terms_and_reports_each_share():
    model, images = two_images()
    terms = {"cider_d": NgramTerm(toy_reward()), "self_retrieval": SelfRetrievalTerm(model, 1.0, MARGIN, True)}
    reward = Reward(terms)
    caps = Captions(torch.tensor([[1, 2, 0], [3, 4, 0]]), np.array([0, 1]), np.array([0, 1]))
    (total,), shares = reward.together(caps, images=images)
    parts = [t([caps], images)[0] for t in terms.values()]
    assert total.tolist() == pytest.approx((parts[0] + parts[1]).tolist())
    assert shares == pytest.approx({"reward_cider_d": parts[0].mean(), "reward_self_retrieval": parts[1].mean()})
    assert reward.stat_names() == ("reward_cider_d", "reward_self_retrieval")


def test_the_signature_names_alpha_the_loss_the_joint_model_and_the_unlabeled_images():
    text = ("Standard_wInit+Cider-D[n4,s6]+SelfRet[a1,vse_pp,m0.2,j0123abcd]+Unl[r1,w10-100]"
            "+average[nspi5]+df[train@3f2a9c1e]+xe[3]+t[0.5]")
    sig = SCSTSignature.parse(text)
    assert str(sig) == text and sig.retrieval == "a1,vse_pp,m0.2,j0123abcd" and sig.unlabeled == "r1,w10-100"
    plain = SCSTSignature.parse("Standard_wInit+Cider-D[n4,s6]+average[nspi5]+df[train@3f2a9c1e]+xe[3]+t[0.5]")
    assert plain.retrieval == "" and "SelfRet" not in str(plain)


# ---------------------------------------------------------------------------- the loop, on a tiny captioner

@pytest.fixture(scope="module")
def joint_model(xe_run):
    """A joint space trained two epochs on the tiny captioner's own labels.h5 and features."""
    from joint.config import load_joint_config
    from joint.train import train

    root, data, _ = xe_run
    feats = next(d.split("=", 1)[1] for d in data if d.startswith("data.features="))
    cfg = load_joint_config(ROOT / "configs/demo/demo_joint.yaml", [
        f"run_dir={root}", f"out_dir={root / 'joint'}", f"data.features={feats}", f"data.prepro_dir={root / 'prep'}",
        "model.embed_dim=8", "model.word_dim=8", "train.epochs=2", "train.batch_size=8"])
    return train(cfg, progress=False)


def sr_overrides(xe_run, joint_model, out: Path, *extra: str) -> list[str]:
    return rl_overrides(xe_run, out, "retrieval.weight=1", f"retrieval.model={joint_model}", *extra)


def test_a_self_retrieval_run_with_unlabeled_hard_negatives_signs_and_resumes_after_a_kill(xe_run, joint_model,
                                                                                           tmp_path):
    from joint.loading import weights_sha256
    from rl.scst import StopRequested, train
    from tests.captioners.test_captioners_train import assert_same_checkpoints

    cfg_path = ROOT / "configs/demo/demo_att2all2_scst.yaml"
    _, data, _ = xe_run
    feats = next(d.split("=", 1)[1] for d in data if d.startswith("data.features="))
    pool = ["retrieval.unlabeled=" + feats, "retrieval.window=[1,4]"]  # any features file serves as a pool
    train(load_scst_config(cfg_path, sr_overrides(xe_run, joint_model, tmp_path / "full", *pool)), progress=False)
    ckpt = torch.load(tmp_path / "full" / "best.pt", weights_only=True)
    sig = SCSTSignature.parse(ckpt["scst_signature"])
    assert sig.retrieval == f"a1,vse_pp,m0.2,j{weights_sha256(joint_model)[:8]}" and sig.unlabeled == "r1,w1-4"
    history = json.loads((tmp_path / "full" / "history.json").read_text())
    assert history[-1].get("reward_self_retrieval") is not None and history[-1]["reward_self_retrieval"] <= 0

    killed = sr_overrides(xe_run, joint_model, tmp_path / "killed", *pool)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "rl.scst", "--config", str(cfg_path), *killed,
                           "train.stop_after_steps=3"], cwd=ROOT, env=env, capture_output=True, text=True, check=False)
    assert proc.returncode == 3, proc.stderr
    with pytest.raises(StopRequested):
        train(load_scst_config(cfg_path, killed + ["train.stop_after_steps=6"]), progress=False)
    train(load_scst_config(cfg_path, killed), progress=False)
    assert_same_checkpoints(tmp_path / "full", tmp_path / "killed")


def test_a_joint_model_of_another_vocabulary_is_one_line_naming_both(xe_run, joint_model, tmp_path):
    from joint.model import JointSpace
    from rl.scst import train

    wrong = torch.load(joint_model, weights_only=True)
    other = JointSpace(**{**wrong["model_args"], "vocab_size": wrong["model_args"]["vocab_size"] + 3})
    wrong.update(model=other.state_dict(), model_args=other.args, vocab_size=wrong["vocab_size"] + 3)
    torch.save(wrong, tmp_path / "other.pt")
    cfg = load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml",
                           sr_overrides(xe_run, tmp_path / "other.pt", tmp_path / "run"))
    with pytest.raises(CapawareError, match=r"vocabulary: the model's \d+ words .* vs the given \d+ words") as err:
        train(cfg, progress=False)
    assert "\n" not in str(err.value) and "other.pt" in str(err.value)


def test_config_refuses_a_retrieval_weight_without_a_model_and_a_bad_window():
    with pytest.raises(CapawareError, match="retrieval.model"):
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", ["retrieval.weight=1"])
    with pytest.raises(CapawareError, match="retrieval.window"):
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml",
                         ["retrieval.weight=1", "retrieval.model=x.pt", "retrieval.window=[5,2]"])
    with pytest.raises(CapawareError, match="which retrieval.weight = 0 turns off"):  # never silently ignored
        load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", ["retrieval.unlabeled=pool.h5"])


def test_the_hard_negative_window_draws_only_from_its_ranks():
    from rl.unlabeled import window_picks

    g = torch.Generator().manual_seed(0)
    pool = nn.functional.normalize(torch.randn(50, 8, generator=g), dim=1)
    queries = nn.functional.normalize(torch.randn(12, 8, generator=g), dim=1)
    for lo, hi in ((0, 1), (5, 20), (40, 60)):
        taken = set()
        picks = window_picks(queries, pool, lo, hi, g, taken)
        assert len(set(picks)) == len(picks) == 12 and taken == set(picks)  # no image twice in a batch
        ranks = np.argsort(-(queries @ pool.t()).numpy(), axis=1, kind="stable")
        where = [int(np.flatnonzero(ranks[i] == p)[0]) for i, p in enumerate(picks)]
        if hi - lo >= 12:  # room for every query in the window: each pick lies in it
            assert all(lo <= w < min(hi, 50) for w in where), (lo, hi, where)
        else:  # a window of one: the first query gets it, the others the nearest free ranks after it
            assert where[0] == lo and all(w >= lo for w in where)
    seen = {p for _ in range(20) for p in window_picks(queries[:1], pool, 5, 20, g)}
    order = np.argsort(-(queries[:1] @ pool.t()).numpy()[0], kind="stable")
    assert seen <= set(order[5:20].tolist()) and len(seen) > 5  # drawn across the window, never outside it


def test_the_joint_models_hash_follows_its_weights_not_where_its_files_lay(joint_model, tmp_path):
    from joint.loading import weights_sha256

    ckpt = torch.load(joint_model, weights_only=True)
    moved = dict(ckpt, features="/elsewhere/img.h5", labels="/elsewhere/labels.h5")  # a copied run's card
    torch.save(moved, tmp_path / "moved.pt")
    assert weights_sha256(tmp_path / "moved.pt") == weights_sha256(joint_model)
    first = next(iter(ckpt["model"]))
    changed = dict(ckpt, model={**ckpt["model"], first: ckpt["model"][first] + 1e-3})
    torch.save(changed, tmp_path / "changed.pt")
    assert weights_sha256(tmp_path / "changed.pt") != weights_sha256(joint_model)
