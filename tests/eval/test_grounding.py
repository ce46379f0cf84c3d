"""eval.grounding: real vs shuffled vs zero features, on tiny sets where the answer is known.

Six image kinds, each with one caption of its own. With features that encode the kind, a trained
captioner writes each image's caption, so shuffling the features across images breaks most captions
(ratio far above 1); with features that are the same for every image (up to small noise), it can
only write what fits the set on average, whatever the features (ratio about 1).
"""
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from capcore.errors import CapawareError
from captioners.config import load_captioner_config
from captioners.prepro import prepro
from captioners.xe import train
from eval.grounding import derangement, grounding
from eval.grounding import main as grounding_main

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")

KINDS = ["a red circle", "two blue squares", "a big green star", "three yellow crosses", "a purple hexagon",
         "four orange triangles"]


def kind_set(root: Path, informative: bool, per_kind: int = 8, n_val: int = 1, n_test: int = 4) -> tuple[Path, Path]:
    """Karpathy json (every caption of an image = its kind's caption) + prepro + feats.h5."""
    images, kinds = [], []
    for k, caption in enumerate(KINDS):
        for j in range(per_kind + n_val + n_test):
            i = len(images)
            split = "train" if j < per_kind else "val" if j < per_kind + n_val else "test"
            images.append({"filepath": "images", "filename": f"{i:06d}.png", "imgid": i, "cocoid": 500 + i,
                           "split": split, "sentids": list(range(5 * i, 5 * i + 5)),
                           "sentences": [{"tokens": caption.split(), "raw": caption + ".", "sentid": 5 * i + s,
                                          "imgid": i} for s in range(5)]})
            kinds.append(k)
    root.mkdir(parents=True)
    json_path = root / "dataset_coco.json"
    json_path.write_text(json.dumps({"images": images, "dataset": "coco"}))
    prepro(json_path, root / "prep", threshold=0, max_length=8)
    rng = np.random.default_rng(0)
    n, dim = len(images), 12
    # uninformative: one feature vector for every image (plus the same small noise): a backbone that sees nothing
    code = np.eye(dim, dtype=np.float32)[kinds] if informative else np.full((n, dim), 0.5, np.float32)
    att = np.repeat(code[:, None, :], 4, 1) + 0.05 * rng.standard_normal((n, 4, dim)).astype(np.float32)
    feats = root / "feats.h5"
    with h5py.File(feats, "w") as f:
        f.create_dataset("att", data=att)
        f.create_dataset("fc", data=att.mean(1))
        f.create_dataset("image_id", data=np.array([im["cocoid"] for im in images], np.int64))
        f.attrs["complete"] = True
    return json_path, feats


def trained(root: Path, informative: bool) -> Path:
    json_path, feats = kind_set(root / "data", informative)
    cfg = load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml", [
        f"data.json={json_path}", f"data.prepro_dir={root / 'data' / 'prep'}", "data.word_count_threshold=0",
        "data.max_length=8", f"data.features={feats}", f"out_dir={root / 'run'}", "model.rnn_size=32",
        "model.input_encoding_size=16", "model.att_hid_size=16", "model.drop_prob_lm=0.0", "train.batch_size=8",
        "train.epochs=25", "train.patience=null", "train.lr=1e-2", "train.lr_decay_start=-1", "train.grad_clip=1.0"])
    return train(cfg, progress=False)


@pytest.fixture(scope="module")
def informative(tmp_path_factory):
    return trained(tmp_path_factory.mktemp("ground_inf"), informative=True)


def test_derangement_moves_every_image_and_is_seeded():
    for n in (2, 3, 10, 101):
        perm = derangement(n, seed=3)
        assert sorted(perm.tolist()) == list(range(n)) and (perm != np.arange(n)).all()
    assert (derangement(50, 1) == derangement(50, 1)).all() and (derangement(50, 1) != derangement(50, 2)).any()
    with pytest.raises(CapawareError):
        derangement(1, 0)


def test_features_that_determine_the_caption_give_a_ratio_far_above_one(informative):
    report = grounding(informative, split="test", device="cpu")
    assert report["n_images"] == 4 * len(KINDS)
    assert report["distinct"]["real"] == len(KINDS)  # every kind's own caption
    assert report["cider_d"]["real"] > 5 * report["cider_d"]["shuffled"]
    assert report["ratio_real_shuffled"] > 5
    assert report["distinct"]["zeros"] <= 2  # no image: one (or two) language-model captions
    assert report["distinct_fraction_real"] == pytest.approx(len(KINDS) / report["n_images"])


def test_features_that_carry_nothing_give_a_ratio_near_one(tmp_path):
    report = grounding(trained(tmp_path, informative=False), split="test", device="cpu")
    assert 0.6 < report["ratio_real_shuffled"] < 1.6
    assert report["distinct"]["real"] < len(KINDS)


def test_cli_writes_json_and_refuses_features_of_other_images(informative, tmp_path, capsys):
    out = tmp_path / "g.json"
    grounding_main([str(informative.parent), "--out", str(out), "--device", "cpu"])
    saved = json.loads(out.read_text())
    assert saved["command"].startswith("python -m eval.grounding") and set(saved["cider_d"]) == {
        "real", "shuffled", "zeros"}
    assert "real/shuffled" in capsys.readouterr().out
    other = tmp_path / "other.h5"  # features of images that are not in the split
    with h5py.File(other, "w") as f:
        f.create_dataset("att", data=np.zeros((3, 4, 12), np.float32))
        f.create_dataset("fc", data=np.zeros((3, 12), np.float32))
        f.create_dataset("image_id", data=np.array([1, 2, 3], np.int64))
        f.attrs["complete"] = True
    with pytest.raises(CapawareError) as exc:  # run_cli prints it as one line and exits with 2
        grounding_main([str(informative.parent), "--features", str(other), "--device", "cpu"])
    err = str(exc.value)
    assert "\n" not in err and "other.h5" in err and "no features" in err
