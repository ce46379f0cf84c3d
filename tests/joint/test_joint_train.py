"""The joint stage's training (joint/train.py) on a tiny synthetic world written as the files it reads: a feats.h5
(stage two's layout) and XE's labels.h5 / vocab.json. Each image holds three of 24 attribute words; its fc vector
is the sum of their fixed random vectors plus noise, its captions are those words in some order. The space must
learn (loss down, test R@1 well above chance), a killed run must resume to the unbroken run's weights and numbers,
and a joint model must refuse another vocabulary or feature width in one line."""
import json

import h5py
import numpy as np
import pytest
import torch

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError
from capcore.harness import StopRequested
from joint.card import JointCard, check_fits
from joint.config import load_joint_config
from joint.train import results_paths, train

WORDS, DIM, SPLITS = 24, 16, {"train": 96, "val": 24, "test": 24}


def write_world(root, seed=0):
    rng = np.random.default_rng(seed)
    basis = rng.normal(size=(WORDS, DIM))
    n = sum(SPLITS.values())
    attrs = np.stack([rng.choice(WORDS, 3, replace=False) for _ in range(n)])
    fc = basis[attrs].sum(1) + 0.3 * rng.normal(size=(n, DIM))
    ids = np.arange(100, 100 + n)
    feats = root / "features" / "img.h5"
    feats.parent.mkdir(parents=True)
    with h5py.File(feats, "w") as f:
        f["fc"], f["att"] = fc.astype(np.float16), np.repeat(fc[:, None], 4, 1).astype(np.float16)
        f["image_id"] = ids[::-1].copy()[::-1]  # any row order: the labels find rows by image id
        f.attrs["complete"] = True
    labels = np.zeros((n * 3, 5), np.int32)
    for i in range(n):
        for c in range(3):
            labels[3 * i + c, :3] = rng.permutation(attrs[i]) + 1
    split = np.repeat(list(SPLITS), list(SPLITS.values())).astype("S5")
    prepro = root / "captions"
    prepro.mkdir()
    with h5py.File(prepro / "labels.h5", "w") as f:
        f["labels"], f["split"], f["image_id"] = labels, split, ids
        f["label_start_ix"], f["label_end_ix"] = np.arange(n) * 3, np.arange(n) * 3 + 3
        f.attrs["vocab_size"] = WORDS
    (prepro / "vocab.json").write_text(json.dumps({"ix_to_word": {str(i + 1): f"w{i}" for i in range(WORDS)}}))
    return root


def config(root, *extra):
    return load_joint_config(None, [f"run_dir={root}", f"out_dir={root}/joint/img",
                                    f"data.features_dir={root}/features", f"data.prepro_dir={root}/captions",
                                    "model.embed_dim=32", "model.word_dim=16", "train.batch_size=16", "train.epochs=6",
                                    "train.lr=0.01", "train.ckpt_every=5",
                                    "loss.name=warmup", "loss.warmup_steps=12", "name=tiny", "device=cpu", *extra])


def test_the_space_learns(tmp_path):
    root = write_world(tmp_path)
    best = train(config(root), progress=False)
    history = json.loads((root / "joint" / "img" / "history.json").read_text())
    assert history[-1]["train_loss"] < 0.5 * history[0]["train_loss"]
    assert history[-1]["rsum"] > history[0]["rsum"]
    metrics = json.loads(results_paths(config(root))[0].read_text())
    chance = 100.0 / SPLITS["test"]
    assert metrics["full"]["i2t_r1"] > 4 * chance and metrics["full"]["t2i_r1"] > 4 * chance
    assert metrics["folds_mean"] is None and metrics["n_images"] == SPLITS["test"]
    card = JointCard.of(load_checkpoint(best), best)
    assert card.vocab_size == WORDS and card.feat_dim == DIM and card.features.endswith("img.h5")
    assert len(card.features_sha256) == 64 and len(card.vocab_sha256) == 64
    assert "| full | 24 |" in results_paths(config(root))[1].read_text()
    assert (root / "joint" / "img" / "tb").is_dir()


def test_kill_then_resume_is_the_unbroken_run(tmp_path):
    whole = write_world(tmp_path / "a")
    train(config(whole), progress=False)
    broken = write_world(tmp_path / "b")
    with pytest.raises(StopRequested):
        train(config(broken, "train.stop_after_steps=23"), progress=False)  # mid-epoch 4, after step 20's checkpoint
    assert load_checkpoint(broken / "joint" / "img" / "last.pt")["step"] == 20
    train(config(broken), progress=False)
    a, b = (load_checkpoint(r / "joint" / "img" / "last.pt") for r in (whole, broken))
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    assert torch.equal(a["criterion"]["steps"], b["criterion"]["steps"])
    assert a["history"] == b["history"]
    ma, mb = (json.loads(results_paths(config(r))[0].read_text()) for r in (whole, broken))
    assert ma["full"] == mb["full"]


def test_a_model_of_another_vocabulary_or_features_is_one_line(tmp_path):
    root = write_world(tmp_path)
    best = train(config(root, "train.epochs=1"), progress=False)
    card = JointCard.of(load_checkpoint(best), best)
    check_fits(card, WORDS, DIM, card.vocab_sha256)
    with pytest.raises(CapawareError) as err:
        check_fits(card, WORDS + 5, 2048, "f" * 64, features="/data/other.h5")
    text = str(err.value)
    assert "\n" not in text
    assert f"{WORDS} words" in text and f"{WORDS + 5} words" in text
    assert "16-wide" in text and "2048-wide" in text and "/data/other.h5" in text and "img.h5" in text
    with pytest.raises(CapawareError, match="joint-space checkpoint"):
        JointCard.of({"weights": 1}, "x.pt")


def test_a_missing_labels_file_names_the_xe_stage(tmp_path):
    root = write_world(tmp_path)
    (root / "captions" / "labels.h5").unlink()
    with pytest.raises(CapawareError, match="XE"):
        train(config(root), progress=False)
