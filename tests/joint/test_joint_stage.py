"""The joint stage around its training: its config's checks, its preflight line (XE's labels.h5 / vocab.json and
the features file) and its doctor line, and its row in ``capaware plan``."""
import pytest

from capaware import preflight
from capaware.plan import Planner
from capcore.errors import CapawareError
from joint.config import SOURCES, load_joint_config, loss_args
from joint.image_encoder import SOURCES as ENCODER_SOURCES
from tests.pipeline_helpers import tiny_config

DEMO = "configs/demo/demo_joint.yaml"


def test_the_config_names_a_registered_loss_and_passes_only_its_settings():
    cfg = load_joint_config(DEMO, ["run_dir=/r", "data.features=cap"])
    assert cfg.out_dir == "/r/joint/cap" and cfg.data.prepro_dir == "/r/captions" and SOURCES == ENCODER_SOURCES
    assert loss_args(cfg) == {"margin": 0.2}
    assert loss_args(load_joint_config(DEMO, ["loss.name=warmup"])) == {"margin": 0.2, "warmup_steps": 0}
    with pytest.raises(CapawareError, match="loss.name: unknown value 'vsepp'"):
        load_joint_config(DEMO, ["loss.name=vsepp"])
    with pytest.raises(CapawareError, match="train.batch_size"):
        load_joint_config(DEMO, ["train.batch_size=0"])


def test_preflight_names_the_labels_xe_writes_unless_xe_runs_first(tmp_path):
    run = tmp_path / "run"
    cfg = load_joint_config(DEMO, [f"run_dir={run}"])
    lines = preflight.preflight(["joint"], [], [], str(run), [cfg])
    assert len(lines) == 3 and all("joint stage" in line for line in lines)
    assert any("labels.h5" in line and "XE" in line for line in lines) and any("img.h5" in line for line in lines)
    assert preflight.preflight(["features", "captioners", "joint"], [], [], str(run), [cfg]) == []
    assert preflight.preflight(["rl"], [], [], str(run), [cfg]) == []  # joint not pending: not checked


def test_the_doctor_line_and_the_plan_row(tmp_path):
    path = tiny_config(tmp_path, joint=[f"{DEMO} train.epochs=2 model.embed_dim=16 model.word_dim=8"])
    checks = preflight.check_config(str(path))
    joint = [c for c in checks if c.name == "joint"]
    assert len(joint) == 1 and joint[0].status == "warn" and not joint[0].required and "labels.h5" in joint[0].detail
    planner = Planner(str(path), str(tmp_path / "run"), "cpu", counts=None)
    plan = planner.joint("joint")
    assert len(plan.works) == len(planner.feature_sets) == 2
    assert all(w.seconds > 0 and "steps of 128" in w.what for w in plan.works)
