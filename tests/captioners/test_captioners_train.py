"""Stage three end to end on a tiny config: train -> best.pt -> decode -> COCO JSON -> attention PNGs,
resume after a kill, config errors. Tiny: 16 synthetic images, 4-region 8-D features, hidden 16."""
import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from capcore.errors import CapawareError
from captioners.config import load_captioner_config
from captioners.prepro import read_labels
from captioners.xe import StopRequested, train
from tests.captioners.test_captioners import tiny_caption_set

ROOT = Path(__file__).resolve().parents[2]


pytestmark = pytest.mark.usefixtures("one_thread")


def assert_same_checkpoints(full, killed) -> None:
    """A killed-and-resumed run's last.pt and best.pt equal the uninterrupted run's: step and every weight."""
    for name in ("last.pt", "best.pt"):
        a = torch.load(full / name, weights_only=True)
        b = torch.load(killed / name, weights_only=True)
        assert a["step"] == b["step"]
        for key in a["model"]:
            assert torch.equal(a["model"][key], b["model"][key]), (name, key)


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    """Synthetic Karpathy set + prepro + a feats.h5 holding every image (random 2 x 2 grid, C = 8)."""
    root = tmp_path_factory.mktemp("captrain")
    json_path, feats = tiny_caption_set(root)
    with h5py.File(feats, "a") as f:
        f.attrs["backbone"] = "metric-learning"  # what stage two writes for a stage-one checkpoint: "Cap"
    return root, json_path, feats


def overrides(tiny, out: Path, *extra: str) -> list[str]:
    root, json_path, feats = tiny
    return [f"data.json={json_path}", f"data.prepro_dir={root / 'prep'}", "data.word_count_threshold=1",
            f"data.features={feats}", f"out_dir={out}", "model.rnn_size=16", "model.input_encoding_size=12",
            "model.att_hid_size=8", "model.drop_prob_lm=0.1", "train.batch_size=4", "train.epochs=2",
            "train.lr=5e-3", "train.ckpt_every=2", "train.log_every=1", "train.ss_start=1",
            "train.ss_increase_every=1", "train.ss_increase_prob=0.2", "val.batch_size=3", *extra]


@pytest.mark.parametrize("core", ["att2all2", "topdown", "transformer"])
def test_train_decode_and_attention_maps(tiny, tmp_path, core):
    root, json_path, _ = tiny
    cfg = load_captioner_config(ROOT / f"configs/demo/demo_{core}.yaml", overrides(tiny, tmp_path / "run"))
    best = train(cfg, progress=False)
    last = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    assert last["done"] and last["step"] == 8  # 16 train images / batch 4 x 2 epochs
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2] and all(h["cider_d"] >= 0 for h in history)
    assert list((tmp_path / "run" / "tb").iterdir())
    again = train(cfg, progress=False)  # a finished run is not retrained
    assert again == best

    from captioners.predict import main as predict_main
    preds_path, att_path = tmp_path / "preds.json", tmp_path / "att.h5"
    predict_main(["--checkpoint", str(best), "--split", "test", "--out", str(preds_path), "--attention", str(att_path),
                 "--no-progress"])
    preds = json.loads(preds_path.read_text())
    lab = read_labels(root / "prep" / "labels.h5")
    assert [p["image_id"] for p in preds] == lab.image_ids[lab.splits == "test"].tolist()
    assert all(set(p) == {"image_id", "caption"} and isinstance(p["image_id"], int) and isinstance(p["caption"], str)
               for p in preds)
    meta = json.loads((tmp_path / "preds.meta.json").read_text())
    assert meta["beam_size"] == 2 and meta["config_hash"] == last["config_hash"]
    assert (meta["core"], meta["stage"]) == (core, "xe")

    from eval.score_captions import main as score_main
    from eval.reporting.results_table import build_table
    score_main(["--preds", str(preds_path), "--refs", str(json_path), "--split", "test", "--out",
                str(tmp_path / "run" / "metrics_test.json"), "--no-meteor", "--no-spice", "--tokenizer", "simple"])
    (row,), _ = build_table([tmp_path / "run"])  # the chain decode -> eval.score_captions -> results table
    assert (row["core"], row["features"], row["training"], row["decoding"]) == (core, "Cap", "XE", "beam 2")
    assert row["config_hash"] == last["config_hash"] and row["C"] is not None and row["S"] is None
    with h5py.File(att_path) as f:
        assert f["alpha"].shape == (4, 16, 4) and (f.attrs["grid_h"], f.attrs["grid_w"]) == (2, 2)
        n_words = [len(c.split()) for c in f["caption"].asstr()[:]]
        alpha = f["alpha"][:].astype(np.float32)
    for k, n in enumerate(n_words):  # each word's attention is a distribution over the grid
        assert np.allclose(alpha[k, :n].sum(-1), 1.0, atol=1e-2)

    from eval.attention_maps import main as maps_main
    maps_main(["--attention", str(att_path), "--refs", str(json_path), "--out", str(tmp_path / "maps"), "--n", "2"])
    pngs = sorted((tmp_path / "maps").glob("attention_*.png"))
    assert len(pngs) == 2 and all(p.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" for p in pngs)


@pytest.mark.parametrize("core", ["topdown", "transformer"])
def test_resume_after_kill_reproduces_the_uninterrupted_run(tiny, tmp_path, core):
    """Killed inside the lr warm-up (4 steps) and again after it: the same weights as one run."""
    config = f"configs/demo/demo_{core}.yaml"
    common = overrides(tiny, tmp_path / "full") + ["train.lr_warmup_steps=4"]
    train(load_captioner_config(ROOT / config, common), progress=False)

    killed = overrides(tiny, tmp_path / "killed") + ["train.lr_warmup_steps=4"]
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    proc = subprocess.run([sys.executable, "-m", "captioners.xe", "--config", config, *killed,
                           "train.stop_after_steps=3"], cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 3, proc.stderr  # died mid-epoch, like a kill
    state = torch.load(tmp_path / "killed" / "last.pt", weights_only=True)
    assert state["step"] == 2 and not state["done"]  # last checkpoint before the kill (ckpt_every=2): step 3 lost

    cfg = load_captioner_config(ROOT / config, killed + ["train.stop_after_steps=5"])
    with pytest.raises(StopRequested):  # killed again, now in the second epoch
        train(cfg, progress=False)
    train(load_captioner_config(ROOT / config, killed), progress=False)

    assert_same_checkpoints(tmp_path / "full", tmp_path / "killed")
    h_full = json.loads((tmp_path / "full" / "history.json").read_text())
    h_killed = json.loads((tmp_path / "killed" / "history.json").read_text())
    assert [h["cider_d"] for h in h_full] == [h["cider_d"] for h in h_killed]

    other = load_captioner_config(ROOT / config, killed + ["train.lr=1e-3"])
    with pytest.raises(CapawareError, match="another config"):
        train(other, progress=False)


def test_config_errors_name_the_key(tmp_path):
    with pytest.raises(CapawareError, match="nonsense"):
        load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml", ["train.nonsense=1"])
    with pytest.raises(CapawareError, match="model.core"):
        load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml", ["model.core=lstm"])
    for name in ("paper/coco_att2all2", "paper/coco_topdown", "demo/demo_att2all2", "demo/demo_topdown"):
        cfg = load_captioner_config(ROOT / f"configs/{name}.yaml")
        assert cfg.name == Path(name).name
    coco = load_captioner_config(ROOT / "configs/paper/coco_topdown.yaml")
    assert (coco.train.batch_size, coco.model.rnn_size, coco.train.lr, coco.train.epochs) == (32, 1024, 5e-4, 20)


def test_cli_reports_missing_features_in_one_line(tiny, tmp_path):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    args = overrides(tiny, tmp_path / "run") + [f"data.features={tmp_path / 'nope.h5'}"]
    proc = subprocess.run([sys.executable, "-m", "captioners.xe", "--config", "configs/demo/demo_att2all2.yaml", *args],
                          cwd=ROOT, env=env, capture_output=True, text=True)
    assert proc.returncode == 2
    assert "features file not found" in proc.stderr and "Traceback" not in proc.stderr


def test_warm_up_rises_linearly_to_the_lr_and_stays():
    from captioners.loop import warmed_lr

    assert [warmed_lr(1.0, s, 4) for s in range(6)] == [0.25, 0.5, 0.75, 1.0, 1.0, 1.0]
    assert warmed_lr(0.5, 0, 0) == 0.5
    with pytest.raises(CapawareError, match="lr_warmup_steps"):
        load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml", ["train.lr_warmup_steps=-1"])


def test_plateaued_counts_validations_since_the_best():
    from captioners.loop import plateaued

    hist = [{"cider_d": c} for c in (0.2, 0.5, 0.4, 0.45)]
    assert not plateaued(hist, None) and not plateaued([], 1)
    assert plateaued(hist, 2) and not plateaued(hist, 3)
    assert not plateaued(hist[:2], 1)  # the last validation is the best


def test_patience_stops_once_val_cider_stops_rising(tiny, tmp_path):
    # lr 0: every validation scores the same, so the first is the best and the next one is no new best
    cfg = load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml", overrides(
        tiny, tmp_path / "run", "train.epochs=6", "train.patience=1", "train.lr=0.0"))
    train(cfg, progress=False)
    last = torch.load(tmp_path / "run" / "last.pt", weights_only=True)
    history = json.loads((tmp_path / "run" / "history.json").read_text())
    assert [h["epoch"] for h in history] == [1, 2] and last["done"] and last["step"] == 8  # not 24
    with pytest.raises(CapawareError, match="train.patience"):
        load_captioner_config(ROOT / "configs/demo/demo_att2all2.yaml", ["train.patience=0"])
