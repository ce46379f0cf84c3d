"""The Transformer pipeline reuses make demo's run folder, so it must ask for the very same earlier outputs.

A run folder keeps one config per output: an entry that differs by one override finds make demo's finished run
in its way and stops (CI caught this only in the 35-minute studies step; this check takes a second).
"""
from pathlib import Path

import yaml

CONFIGS = Path(__file__).resolve().parents[2] / "configs" / "demo"


def load(name: str) -> dict:
    return yaml.safe_load((CONFIGS / name).read_text())


def test_the_transformer_pipeline_asks_for_the_demos_outputs_word_for_word():
    demo, transformer = load("pipeline_demo.yaml"), load("pipeline_transformer.yaml")
    assert transformer["run_dir"] == demo["run_dir"]
    for stage in ("stage1", "features", "feature_sets", "joint"):
        assert transformer.get(stage) == demo.get(stage), stage
    for stage in ("captioners", "rl"):
        shared = transformer[stage][:len(demo[stage])]
        assert shared == demo[stage], stage
        assert len(transformer[stage]) == len(demo[stage]) + 1  # plus the Transformer's own run


def test_the_demos_self_retrieval_run_reads_the_joint_space_the_demo_trains():
    """The SR run's retrieval.model is the joint stage's best.pt of the same features (issue #66)."""
    demo = load("pipeline_demo.yaml")
    assert demo["joint"] == ["configs/demo/demo_joint.yaml"]
    sr = load("demo_att2all2_sr_scst.yaml")
    assert sr["retrieval"]["model"] == load("demo_joint.yaml")["out_dir"] + "/best.pt"
    assert sr["retrieval"]["weight"] == 1.0 and any(e.startswith("configs/demo/demo_att2all2_sr_scst.yaml")
                                                    for e in demo["rl"])
    plain = load("demo_att2all2_scst.yaml")  # the SR run is its baseline's recipe but for the retrieval term
    assert {k: v for k, v in sr.items() if k not in ("name", "out_dir", "retrieval")} == \
        {k: v for k, v in plain.items() if k not in ("name", "out_dir")}
