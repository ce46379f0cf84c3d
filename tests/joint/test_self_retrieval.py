"""Self-retrieval R@K of generated captions (joint/self_retrieval.py, eval/self_retrieval.py; issue #66): caption words
to ids and back, the ranks against a NumPy computation of the same cosines, and the command on a run folder written
by hand: it scores the run whose features its joint model was trained on, leaves another out, and refuses words
outside the vocabulary in one line."""
import json

import h5py
import numpy as np
import pytest
import torch

from capcore.errors import CapawareError
from eval.self_retrieval import main as score_main
from eval.self_retrieval import output_path
from joint.loading import load_joint
from joint.self_retrieval import caption_ids, self_retrieval
from tests.joint.test_joint_train import config, write_world
from joint.train import train


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = write_world(tmp_path_factory.mktemp("selfret"))
    best = train(config(root, "train.epochs=2"), progress=False)
    return root, best


def test_caption_ids_follow_the_vocabulary_and_pad_with_zero(world):
    root, _ = world
    ids = caption_ids(["w0 w5 w23", "w7", ""], root / "captions" / "vocab.json")
    assert ids.tolist() == [[1, 6, 24], [8, 0, 0], [0, 0, 0]]
    with pytest.raises(CapawareError, match=r"outside this vocabulary \(\['dog'\]\)") as err:
        caption_ids(["w0 dog"], root / "captions" / "vocab.json")
    assert "\n" not in str(err.value)


def test_ranks_are_the_own_images_place_among_the_cosines(world):
    _, best = world
    model, _ = load_joint(best)
    g = torch.Generator().manual_seed(0)
    feats, ids = torch.randn(30, 16, generator=g), torch.randint(1, 25, (30, 4), generator=g)
    got = self_retrieval(model, feats, ids)
    with torch.no_grad():
        sims = (model.embed_captions(ids) @ model.embed_images(feats).t()).double().numpy()
    order = np.argsort(-sims, axis=1, kind="stable")  # an independent ranking of every image per caption
    ranks = np.array([int(np.flatnonzero(order[i] == i)[0]) for i in range(30)])
    assert got.ranks.tolist() == ranks.tolist() and got.retrieved.tolist() == order[:, 0].tolist()
    for k, r in zip((1, 5, 10), got.metrics.t2i):
        assert r == pytest.approx(100.0 * np.mean(ranks < k))
    assert got.as_dict()["chance_r1"] == pytest.approx(100 / 30)


def write_run(root, name, feats_path, captions: dict[int, str]):
    run = root / "captioners" / name
    run.mkdir(parents=True)
    (run / "preds_test.json").write_text(json.dumps([{"image_id": i, "caption": c} for i, c in captions.items()]))
    (run / "preds_test.meta.json").write_text(json.dumps({"features": str(feats_path), "stage": "xe"}))
    return run


def test_the_command_scores_each_run_in_the_space_of_its_own_features(world, tmp_path, capsys):
    root, best = world
    with h5py.File(root / "captions" / "labels.h5") as f:
        split, image_ids = f["split"][:].astype(str), f["image_id"][:]
        first = f["labels"][:][f["label_start_ix"][:]]
    test = np.flatnonzero(split == "test")
    truth = {int(image_ids[i]): " ".join(f"w{w - 1}" for w in first[i] if w) for i in test}
    good = write_run(tmp_path, "good", root / "features" / "img.h5", truth)
    other = write_run(tmp_path, "other", tmp_path / "elsewhere.h5", truth)
    score_main([str(good), str(other), "--joint", str(best)])
    out = capsys.readouterr().out
    assert "no joint model was trained on its features; left out" in out and not output_path(other).exists()
    record = json.loads(output_path(good).read_text())
    ranks = np.array([r["rank"] for r in record["per_image"]])
    assert [r["image_id"] for r in record["per_image"]] == sorted(truth)
    assert record["r1"] == pytest.approx(100 * np.mean(ranks == 0)) and record["n_images"] == len(test)
    assert record["r1"] > 4 * record["chance_r1"]  # a reference caption finds its own image in a trained space


def test_capaware_score_adds_self_retrieval_and_refuses_a_joint_model_of_other_features(world, tmp_path):
    """eval.score_captions --joint (capaware score): the same record as eval.self_retrieval's, its features read from
    the predictions' meta; a joint model trained on another features file is one line naming both."""
    from eval.score_captions import self_retrieval_section
    from eval.self_retrieval import score_run

    root, best = world
    with h5py.File(root / "captions" / "labels.h5") as f:
        split, image_ids = f["split"][:].astype(str), f["image_id"][:]
        first = f["labels"][:][f["label_start_ix"][:]]
    preds = {int(image_ids[i]): " ".join(f"w{w - 1}" for w in first[i] if w) for i in np.flatnonzero(split == "test")}
    run = write_run(tmp_path, "run", root / "features" / "img.h5", preds)
    meta = json.loads((run / "preds_test.meta.json").read_text())
    got = self_retrieval_section(preds, meta, str(best), str(run / "preds_test.json"), "test")
    model, card = load_joint(best)
    want = score_run(run, {card.features: ((model, card), best)})
    assert got["per_image"] == want["per_image"] and got["r1"] == want["r1"]
    assert got["joint_sha256"] == want["joint_sha256"]
    with pytest.raises(CapawareError, match="not on these captions' features") as err:
        self_retrieval_section(preds, {"features": str(tmp_path / "other.h5")}, str(best), "p.json", "test")
    assert "\n" not in str(err.value)
