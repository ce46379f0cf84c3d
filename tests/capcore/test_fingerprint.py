"""Run fingerprints (capcore.fingerprint): one rule for every stage. Bookkeeping fields (where to write,
how often, which device, loader workers) do not change a fingerprint, a setting that changes the weights
does, and a path is hashed as where it points: inside the run folder relative to it, elsewhere absolute."""
import os

import pytest

from capcore.fingerprint import fingerprint_values, run_fingerprint
from captioners.config import load_captioner_config
from embedder.config import load_config as load_stage1_config
from rl.config import load_scst_config

LOADERS = {"stage one": (load_stage1_config, "configs/demo/demo_pose.yaml", "train.lr=0.5"),
           "captioner XE": (load_captioner_config, "configs/demo/demo_att2all2.yaml", "train.lr=0.5"),
           "SCST": (load_scst_config, "configs/demo/demo_att2all2_scst.yaml", "train.lr=0.5")}
BOOKKEEPING = {"stage one": ["train.ckpt_every=7", "train.log_every=3", "device=cpu", "out_dir=elsewhere",
                             "data.num_workers=3", "graph.workers=5", "name=other", "eval.k=7"],
               "captioner XE": ["train.ckpt_every=7", "train.log_every=3", "device=cpu", "out_dir=elsewhere",
                                "data.num_workers=3", "val.batch_size=7", "name=other"],
               "SCST": ["train.ckpt_every=7", "train.log_every=3", "device=cpu", "out_dir=elsewhere",
                        "data.num_workers=3", "val.batch_size=7", "reward.df_cache=x.h5", "init=other/best.pt"]}


def load(stage, *overrides):
    loader, path, _ = LOADERS[stage]
    return loader(path, list(overrides))


@pytest.mark.parametrize("stage", list(LOADERS))
def test_bookkeeping_leaves_the_fingerprint_and_a_setting_changes_it(stage):
    base = run_fingerprint(load(stage))
    assert run_fingerprint(load(stage, *BOOKKEEPING[stage])) == base
    assert run_fingerprint(load(stage, LOADERS[stage][2])) != base
    assert run_fingerprint(load(stage), {"init_sha256": "ab"}) != base  # extra facts count


@pytest.mark.parametrize("stage", list(LOADERS))
def test_run_dir_spelled_relative_or_absolute_gives_one_fingerprint(stage, tmp_path):
    relative = load(stage, "run_dir=runs/some_run")
    absolute = load(stage, f"run_dir={os.path.abspath('runs/some_run')}")
    assert run_fingerprint(relative) == run_fingerprint(absolute)
    moved = load(stage, f"run_dir={tmp_path / 'moved'}")  # the run folder moved: paths inside it move along
    assert run_fingerprint(moved) == run_fingerprint(relative)


def test_paths_inside_the_run_folder_are_relative_to_it_and_others_absolute():
    values = fingerprint_values(load("stage one", "run_dir=runs/r", "data.root=/data/mpii"))
    assert values["data"]["root"] == "/data/mpii"
    values = fingerprint_values(load("stage one", "run_dir=runs/r", "data.root=runs/r/data/poses"))
    assert values["data"]["root"] == "$RUN/data/poses"
    values = fingerprint_values(load("stage one", "run_dir=runs/r", "data.root=data/poses"))
    assert values["data"]["root"] == os.path.abspath("data/poses")
    assert "run_dir" not in values and "out_dir" not in values and "ckpt_every" not in values["train"]


def test_a_field_added_later_counts_only_when_set():
    """train.layer_lr came after finished runs: at its default it leaves their fingerprints as they were."""
    base = load("stage one")
    assert "layer_lr" not in fingerprint_values(base)["train"]
    assert run_fingerprint(load("stage one", "train.layer_lr={}")) == run_fingerprint(base)
    scaled = load("stage one", "train.layer_lr.layer4=3")
    assert fingerprint_values(scaled)["train"]["layer_lr"] == {"layer4": 3.0}
    assert run_fingerprint(scaled) != run_fingerprint(base)
