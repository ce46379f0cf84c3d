"""studies/probes/probe_curve.py: probes during stage one leave training exactly as it would be unprobed."""
import json
from pathlib import Path

import pytest
import torch

ROOT = Path(__file__).resolve().parents[2]


def tiny(root: Path, out: Path) -> list[str]:
    return [f"data.root={root}", f"out_dir={out}", f"run_dir={out}",  # tables under out, not the checkout's runs/
            "data.input_size=32", "model.init=none", "model.embed_dim=8", "train.freeze=none", "train.jitter=0.2",
            "train.batch_size=16", "train.k=3", "train.anchors_per_batch=2",
            "train.epochs=0.2", "train.head_warmup_steps=0", "train.ckpt_every=2", "graph.m=8", "graph.workers=1",
            "eval.k=5", "eval.n_queries=8", 'methods=[{row: "L(Log-ratio)+M(Dense)", lr: 0.001}]']


@pytest.fixture(scope="module")
def caption_root(tmp_path_factory):
    from capdata.synthetic import generate_captions

    root = tmp_path_factory.mktemp("captions") / "captions"
    generate_captions(root, n_train=48, n_test=8, seed=0, size=32)
    return root


def test_probed_training_ends_at_the_unprobed_weights(tmp_path, caption_root, monkeypatch):
    """Both runs in this process, one after the other (a subprocess each spent most of its time importing torch):
    the unprobed one starts with nothing held from the first (the trunk cache emptied)."""
    from embedder import rows, trunk_cache
    from studies.probes import probe_curve

    monkeypatch.chdir(ROOT)
    probe_curve.main(["configs/demo/demo_caption.yaml", *tiny(caption_root, tmp_path / "curve"),
                      "--every", "2", "--groups", "colour", "count"])
    trunk_cache.forget()
    rows.main(["--config", "configs/demo/demo_caption.yaml", *tiny(caption_root, tmp_path / "plain")])
    a = torch.load(tmp_path / "curve/methods/l_log_ratio_m_dense/model.pt", weights_only=True)
    b = torch.load(tmp_path / "plain/methods/l_log_ratio_m_dense/model.pt", weights_only=True)
    assert a["step"] == b["step"] > 2
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    result = json.loads((tmp_path / "curve/probe_curve.json").read_text())
    steps = [r["step"] for r in result["rows"]]
    assert steps == list(range(0, a["step"] + 1, 2))[: len(steps)] and len(steps) == a["step"] // 2 + 1
    assert set(result["rows"][0]["probe"]) == set(result["rows"][0]["probe_val"]) == {"colour", "count"}
    assert all(0 <= v <= 1 for r in result["rows"] for key in ("probe", "probe_val") for v in r[key].values())
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    events = EventAccumulator(str(tmp_path / "curve/methods/l_log_ratio_m_dense/tb/probe")).Reload()
    logged = {e.step: e.value for e in events.Scalars("probe_val/colour")}
    want = {r["step"]: r["probe_val"]["colour"] for r in result["rows"] if r["row"] != "start"}
    assert logged == pytest.approx(want)
