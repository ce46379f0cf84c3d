import pytest

from capcore.config import config_hash
from capcore.errors import CapawareError
from embedder.config import load_config


def test_unknown_key_names_key_and_file(tmp_path):
    path = tmp_path / "bad.yaml"
    path.write_text("train:\n  learning_rate: 0.1\n")
    with pytest.raises(CapawareError) as err:
        load_config(path)
    assert "train.learning_rate" in str(err.value) and str(path) in str(err.value)


def test_mistyped_value_is_an_error():
    with pytest.raises(CapawareError, match="train.batch_size"):
        load_config(None, ["train.batch_size=many"])


def test_missing_file():
    with pytest.raises(CapawareError, match="config file not found"):
        load_config("/nonexistent/config.yaml")


def test_overrides_apply_and_change_the_hash():
    base = load_config("configs/demo_pose.yaml")
    other = load_config("configs/demo_pose.yaml", ["train.lr=0.5"])
    assert other.train.lr == 0.5 and base.train.lr != 0.5
    assert config_hash(base) != config_hash(other)
    assert [m.loss for m in base.methods] == ["log_ratio", "triplet", "triplet", "margin"]


@pytest.mark.parametrize("name", ["demo_pose", "demo_layout", "mpii_pose_study", "lsun_layout_study",
                                  "mpii_pose_dims", "study_pose_dims", "demo_layout_lr_sweep", "demo_caption_lr_sweep", "demo_caption_budget_probe", "study_caption_controls", "study_dims_controls", "demo_caption", "coco_caption", "demo_pose_lr_sweep"])
def test_shipped_configs_load(name):
    load_config(f"configs/{name}.yaml")
