"""studies/stage_one_seeds/stage1_seeds.py: where each seed's study writes, and who is compared with whom."""
import pytest

from capcore.errors import CapawareError
from embedder.config import load_config
from studies.stage_one_seeds.stage1_seeds import comparison, seed_overrides


def test_seed_zero_is_the_pipeline_run_and_others_write_apart(tmp_path):
    cfg = load_config("configs/demo/demo_pose.yaml", [f"run_dir={tmp_path}"])
    extra, run = seed_overrides(cfg, str(tmp_path), 0)
    assert extra == [] and run.results_root == tmp_path / "results"
    extra, run = seed_overrides(cfg, str(tmp_path), 2)
    assert extra == ["seed=2", f"out_dir={tmp_path / 'seeds' / 's2' / 'pose'}"]
    assert run.results_root == tmp_path / "seeds" / "s2" / "results"


def test_caption_seeds_share_seed_zeros_backbone(tmp_path):
    cfg = load_config("configs/demo/demo_caption.yaml", [f"run_dir={tmp_path}"])
    with pytest.raises(CapawareError, match="run seed 0 first"):
        seed_overrides(cfg, str(tmp_path), 1)
    shared = tmp_path / "caption" / "class_pretrained" / "model.pt"
    shared.parent.mkdir(parents=True)
    shared.write_bytes(b"")
    assert f"model.init={shared}" in seed_overrides(cfg, str(tmp_path), 1)[0]


def test_dims_sweep_compares_the_smallest_log_ratio_with_every_triplet_row():
    args = comparison(load_config("studies/stage_one_seeds/configs/study_pose_dims.yaml", []))
    matches = args.index("--matches")
    assert args[:2] == ["--reference", "L(Log-ratio)+M(Dense) 16-D"] and args[2] == "--against"
    assert args[3:matches] == [f"L(Triplet)+M(Dense) {d}-D" for d in (16, 128)]
    assert args[matches + 1:] == ["--beside", *(f"L(RnC) {d}-D" for d in (16, 128))]  # after the paper: no claim
    assert comparison(load_config("configs/demo/demo_pose.yaml", [])) == ["--reference", "L(Log-ratio)+M(Dense)"]


def test_claims_name_the_figure_and_track():
    from studies.stage_one_seeds.stage1_seeds import claim

    assert claim(load_config("configs/demo/demo_layout.yaml", [])).startswith("Fig. 3 (layout)")
    assert claim(load_config("studies/stage_one_seeds/configs/study_pose_dims.yaml", [])).startswith("Fig. 5: a 16-D")


def test_verdict_rows_of_studies_not_rerun_are_kept(tmp_path):
    from studies.stage_one_seeds.stage1_seeds import merge_rows

    path = tmp_path / "verdicts_study.md"
    path.write_text("title\n\n| study | claim | verdict |\n|---|---|---|\n| a | c | old a |\n| b | c | old b |\n")
    assert merge_rows(path, ["| b | c | new b |", "| z | c | new z |"]) == ["| a | c | old a |", "| b | c | new b |",
                                                                            "| z | c | new z |"]
    assert merge_rows(tmp_path / "none.md", ["| a | c | v |"]) == ["| a | c | v |"]
