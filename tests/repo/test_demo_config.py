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
    for stage in ("stage1", "features", "feature_sets"):
        assert transformer.get(stage) == demo.get(stage), stage
    for stage in ("captioners", "rl"):
        shared = transformer[stage][:len(demo[stage])]
        assert shared == demo[stage], stage
        assert len(transformer[stage]) == len(demo[stage]) + 1  # plus the Transformer's own run


def test_the_joint_pipeline_asks_for_the_demos_outputs_word_for_word():
    """configs/demo/pipeline_joint.yaml is the demo plus one joint stage entry, in the demo's run folder."""
    demo, joint = load("pipeline_demo.yaml"), load("pipeline_joint.yaml")
    assert joint["run_dir"] == demo["run_dir"] and "joint" not in demo
    for stage in ("stage1", "features", "feature_sets", "captioners", "rl"):
        assert joint.get(stage) == demo.get(stage), stage
    assert joint["joint"] == ["configs/demo/demo_joint.yaml"]
