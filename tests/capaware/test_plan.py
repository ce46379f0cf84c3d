"""``capaware plan``: the counts behind each stage's estimate, checked by hand on the tiny pipeline with every
probe replaced by a constant, the schedule of a stage's commands over its jobs, and the command itself on the
tiny pipeline with its real probes (what it prints, and the feature files' disk). How close its times come to a
measured run is a benchmark's question (benchmarks/bench_plan.py), not a unit test's."""
from __future__ import annotations

import json
import math
import subprocess
import sys

import pytest

from capaware import plan
from capaware.plan import Counts, StagePlan, Work
from tests.pipeline_helpers import ROOT, TINY, env


def test_a_stage_runs_its_commands_jobs_at_a_time_in_order():
    works = [Work("a", 5), Work("b", 3), Work("c", 4)]
    assert StagePlan("x", 1, works).seconds() == 12
    assert StagePlan("x", 2, works).seconds() == 7  # a | b then c
    assert StagePlan("x", 8, works).seconds() == 5
    assert StagePlan("x", 2, [Work("a", 1, ram=3), Work("b", 1, ram=5), Work("c", 1, ram=4)]).ram() == 9


def test_counts_come_from_the_json_or_from_the_generator_that_will_write_it(tmp_path):
    images = [{"split": s, "filename": f"{i}.jpg", "cocoid": i, "sentences": [{"tokens": ["a", "dog"]}]}
              for i, s in enumerate(["train"] * 3 + ["restval"] * 2 + ["val"] + ["test"] * 4)]
    (tmp_path / "dataset_coco.json").write_text(json.dumps({"images": images}))
    assert plan.caption_file_counts(tmp_path / "dataset_coco.json") == Counts(5, 1, 4)
    synth = type("S", (), {"n_train": 120, "n_test": 30, "n_val": None})
    assert plan.synthetic_counts(synth, "caption") == Counts(120, 12, 30)  # val: n_train / 10, as the generator
    assert plan.synthetic_counts(synth, "pose") == Counts(120, 0, 30)


def test_the_tiny_pipelines_estimate_is_its_counts_times_the_probes(tmp_path, monkeypatch):
    """Every probe returns 1 s a call (a command's start and scoring 0): each stage's seconds are then its
    steps, counted here by hand from tests/fixtures/pipeline_tiny.yaml."""
    monkeypatch.setattr(plan.probe, "trunk_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(plan.probe, "captioner_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(plan.probe, "process_seconds", lambda: 0.0)
    monkeypatch.setattr(plan.probe, "scoring_seconds", lambda n: 0.0)
    monkeypatch.setattr(plan, "generator_seconds", lambda *a: 0.0)
    stages = {p.stage: p for p in plan.Planner(str(TINY), str(tmp_path / "run"), "cpu").stages()}
    # stage one: 64 train, 16 test, 6 val caption images; class pretraining ceil(0.5 x ceil(48 / 16)) = 2 steps,
    # one row of ceil(0.1 x 64) = 7 steps, its retrieval embeds 86 images at 1/64 s, the graph on 1 worker
    graph = 64 * plan.GRAPH_CORE_SECONDS_AT_20K * (64 / 20_000) ** plan.GRAPH_GROWTH
    assert stages["stage1"].seconds() == pytest.approx(2 + 7 + 86 / 64 + graph)
    # XE, per feature set: 2 epochs x ceil(64 / 8) = 16 steps; 2 validations of 6 images greedy (1/6 s each); the
    # test split's 16 images by beam (1/16 s each) and twice greedy (grounding); two runs, one job
    assert stages["captioners"].seconds() == pytest.approx(2 * (16 + 12 / 6 + 16 * (1 / 16 + 2 / 6)))
    assert stages["rl"].seconds() == pytest.approx(2 * (8 + 6 / 6 + 16 * (1 / 16 + 2 / 6)))  # 1 epoch, 1 validation
    assert len(stages["features"].works) == 2 and len(stages["data"].works) == 2  # captions, pretraining set


@pytest.mark.timeout(300)
def test_capaware_plan_prints_every_stage_and_the_feature_files_disk(tmp_path):
    from capaware.preflight import feature_bytes
    from feature_extract.config import load_features_config

    out = subprocess.run([sys.executable, "-m", "capaware", "plan", str(TINY), "--run", str(tmp_path / "run"), "--json",
                          str(tmp_path / "plan.json")], cwd=ROOT, env=env(), capture_output=True, text=True)
    assert out.returncode == 0, out.stderr
    assert "| stage | commands | time | disk | peak RAM |" in out.stdout
    timing = [line for line in out.stderr.splitlines() if line.startswith("capaware plan: timing ")]
    assert timing and len(timing) == out.stderr.count("capaware plan:   done in ")  # each probe says it is busy
    got = json.loads((tmp_path / "plan.json").read_text())
    assert list(got) == ["data", "stage1", "features", "captioners", "rl"]
    assert all(s["seconds"] > 0 for s in got.values())
    cfg = load_features_config(ROOT / "configs/demo/demo_features_img.yaml",
                               [f"run_dir={tmp_path / 'run'}", "input.size=64", "att_size=2"])
    assert got["features"]["disk"] == 2 * feature_bytes(cfg, 64 + 6 + 16)  # two files of every caption image
    assert not (tmp_path / "run").exists()  # planning writes nothing of the run
    assert math.isfinite(got["stage1"]["ram"])


def test_the_stored_h200_figures_are_the_benchmark_outputs_they_cite():
    """plan_figures_h200.json is typed from bench_gpu_h200.txt: each figure must be a number that file printed."""
    figures = json.loads((ROOT / "benchmarks/results/plan_figures_h200.json").read_text())
    printed = (ROOT / figures["source"].split(" ")[0]).read_text()
    lines = [ln.lower().replace("-", "") for ln in printed.splitlines()]
    for r in figures["trunk"]:  # a training line names the trunk and its batch, the forward line says "forward"
        kind = [ln for ln in lines if r["arch"] in ln and ("forward" in ln) != r["train"] and f"{r['size']} px"
                in ln or (r["train"] and ln.strip().startswith(r["arch"] + " "))]
        assert any(f"{r['images_per_s']} img/s" in ln for ln in kind), r
    for r in figures["captioner"]:
        line = next(ln for ln in printed.splitlines() if ln.strip().startswith(r["core"]))
        assert f"batch {r['batch']} " in line and f"{1e3 * r['seconds']:.1f} ms/step" in line, r


def test_a_slow_probe_is_the_median_of_three_calls_not_one(monkeypatch):
    """Issue #58: a probe step slower than a second was timed once, so one slow call on a busy core set the plan
    (two plans of one config differed 2-4x); it is now the median of three calls after the warm-up."""
    calls = iter([2.0, 9.0, 2.1, 2.2])  # the warm-up, then one slow call among three
    monkeypatch.setattr(plan.probe, "_seconds", lambda step: next(calls))
    assert plan.probe._timed(lambda: None) == 2.2


def test_planning_real_data_that_is_not_here_is_one_line_that_names_counts(tmp_path, monkeypatch, capsys):
    monkeypatch.setattr(plan.probe, "process_seconds", lambda: 0.0)
    monkeypatch.setattr(plan, "generator_seconds", lambda *a: 0.0)
    with pytest.raises(plan.CapawareError) as err:
        plan.main([str(ROOT / "configs/paper/pipeline_coco.yaml"), "--run", str(tmp_path / "run")])
    assert "not found" in err.value.problem and "--counts TRAIN,VAL,TEST" in err.value.fix


def test_a_self_retrieval_run_is_priced_with_its_reward_and_its_unlabeled_images(tmp_path, monkeypatch):
    """The SCST step of a run with the retrieval term costs the term's probe more; with unlabeled images 1:1 the
    captioner's step is priced at twice the images (their captions are sampled too) and so is the term. Probes are
    stubbed: a captioner step costs its images in seconds, the term 100 s per image."""
    import yaml
    monkeypatch.setattr(plan.probe, "trunk_seconds", lambda *a, **k: 1.0)
    monkeypatch.setattr(plan.probe, "captioner_seconds", lambda core, sizes, vocab, batch, *a, **k: float(batch))
    monkeypatch.setattr(plan.probe, "retrieval_seconds", lambda sizes, vocab, images, captions, *a, **k: 100.0 * images)
    monkeypatch.setattr(plan.probe, "process_seconds", lambda: 0.0)
    monkeypatch.setattr(plan.probe, "scoring_seconds", lambda n: 0.0)
    monkeypatch.setattr(plan, "generator_seconds", lambda *a: 0.0)
    cfg = yaml.safe_load(TINY.read_text())
    base = cfg["rl"][0]
    sr = f"{base} retrieval.weight=1 retrieval.model={tmp_path}/joint.pt"
    cfg["rl"] = [base, sr, f"{sr} retrieval.unlabeled={tmp_path}/pool.h5 retrieval.unlabeled_ratio=1",
                 f"{sr} data.features=img"]  # an entry naming its set runs there alone, as in the pipeline
    path = tmp_path / "pipeline_sr.yaml"
    path.write_text(yaml.safe_dump(cfg))
    works = next(p for p in plan.Planner(str(path), str(tmp_path / "run"), "cpu").stages() if p.stage == "rl").works
    steps = 8  # 1 epoch of ceil(64 / 8) batches of 8 images
    assert len(works) == 7 and works[-1].what.endswith("on img: 8 steps of 8")
    plain, with_term, with_pool = (w.seconds for w in works[:6:2])  # each entry on the first feature set
    assert with_term - plain == pytest.approx(steps * 100 * 8)
    assert with_pool - plain == pytest.approx(steps * (8 + 100 * 16))  # 16 images a step instead of 8
