"""Feature sets declared once (issue #57): a pipeline's captioners train on every file its features configs write,
each named by its file; ``feature_sets:`` only chooses among them or names files a run already holds."""
import pytest
from omegaconf import OmegaConf

from capcore.errors import CapawareError
from capcore.pipeline_config import PipelineConfig, feature_sets_of, load_pipeline
from tests.pipeline_helpers import ROOT


def config(**kw) -> PipelineConfig:
    return OmegaConf.merge(OmegaConf.structured(PipelineConfig), kw)


def test_the_sets_are_the_features_files_by_name_unless_the_config_chooses():
    outs = ["runs/x/features/img.h5", "runs/x/features/vit_b16.h5", "/abs/cap.h5"]
    assert feature_sets_of(config(captioners=["c.yaml"]), outs) == ["img", "vit_b16", "cap"]
    assert feature_sets_of(config(captioners=["c.yaml"], feature_sets=["cap"]), outs) == ["cap"]
    assert feature_sets_of(config(), []) == []  # no stage three: nothing to train
    with pytest.raises(CapawareError, match="no features entry"):
        feature_sets_of(config(rl=["s.yaml"]), [])


def test_the_demo_trains_every_captioner_on_its_two_feature_files():
    from capaware.pipeline_plan import Plan

    plan = Plan(load_pipeline(str(ROOT / "configs/demo/pipeline_demo.yaml"), "runs/x"))
    assert plan.feature_sets == ["img", "cap"]
    runs = [next(o for o in e.overrides if o.startswith("data.features=")) for e in plan.captioners]
    assert runs == ["data.features=img", "data.features=cap"] * 2  # Att2all2, then Top-Down


def test_meteor_at_scores_defers_every_runs_meteor_to_one_command_of_the_scores_stage(tmp_path):
    """Issue #55: with ``meteor: at_scores`` (the demo's) each XE and SCST command leaves METEOR pending unless the
    environment already says otherwise (CAPAWARE_METEOR=off wins), and the scores stage scores every run's METEOR
    in one process before Table 1 reads them; ``per_run`` (the default, the studies') runs none of it."""
    import yaml

    from capaware.pipeline_plan import Plan

    demo = ROOT / "configs/demo/pipeline_demo.yaml"
    plan = Plan(load_pipeline(str(demo), "runs/x"))
    assert plan.cfg.meteor == "at_scores"
    for stage in ("captioners", "rl"):
        assert all(c.startswith("CAPAWARE_METEOR=${CAPAWARE_METEOR:-later} python -m capaware.stage ")
                   for c in plan.commands(stage))
    scores = plan.commands("scores")
    assert scores[0].startswith("python -m eval.meteor_pending ") and "eval.reporting.results_table" in scores[2]
    assert scores[1].startswith("python -m eval.self_retrieval ")  # Table 1's SR columns (the demo has joint spaces)
    assert all(d in scores[0] for d in plan.captioner_dirs())  # XE and SCST runs alike
    per_run = yaml.safe_load(demo.read_text()) | {"meteor": "per_run"}
    (tmp_path / "p.yaml").write_text(yaml.safe_dump(per_run))
    plain = Plan(load_pipeline(str(tmp_path / "p.yaml"), "runs/x"))
    assert not any("CAPAWARE_METEOR" in c or "meteor_pending" in c
                   for s in ("captioners", "rl", "scores") for c in plain.commands(s))
    (tmp_path / "bad.yaml").write_text(yaml.safe_dump(per_run | {"meteor": "sometimes"}))
    with pytest.raises(CapawareError, match="meteor: 'sometimes'"):
        load_pipeline(str(tmp_path / "bad.yaml"), None)
