"""scripts/pipeline.sh on tests/fixtures/pipeline_tiny.yaml: stage skipping, one-line failures, and a
SIGKILL during stage three followed by a rerun giving the tables of an uninterrupted run."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from capcore.run_layout import (
    CaptionerDir,
    CaptionerManifest,
    RunDir,
    StudyManifest,
    read_manifest,
)

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "pipeline_tiny.yaml"


def env() -> dict:
    bin_dir = str(Path(sys.executable).parent)  # the venv's python, as `make` puts it first on PATH
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT))


def pipeline(config: Path, run: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/pipeline.sh", str(config), "--run", str(run), *args], cwd=ROOT,
                          env=env(), capture_output=True, text=True, **kw)


def tiny_config(tmp: Path, **changes) -> Path:
    cfg = yaml.safe_load(TINY.read_text())
    cfg.update(changes)
    path = tmp / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def table_rows(run: Path) -> list[dict]:
    """Table 1 rows without the fields that name the run folder."""
    rows = json.loads((run / "results" / "captioning" / "captioning.json").read_text())["rows"]
    keep = ("model", "features", "training", "B4", "C", "M", "R", "n_images", "decoding")
    return [{k: r.get(k) for k in keep} for r in rows]


def test_a_failed_stage_stops_with_one_line_naming_its_log(tmp_path):
    missing = tmp_path / "no_such_dataset"
    bad = tiny_config(tmp_path, stage1=[f"configs/demo/demo_caption.yaml data.synthetic=null data.root={missing}"])
    out = pipeline(bad, tmp_path / "run")
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: stage data failed") and str(missing) in lines[0]
    assert lines[0].endswith(f"(full log: {tmp_path / 'run' / 'logs' / 'data.log'})")
    assert not (tmp_path / "run" / ".pipeline" / "data.done").exists()


def test_a_bad_stage_config_is_refused_before_anything_runs(tmp_path):
    bad = tiny_config(tmp_path, stage1=["configs/demo/demo_caption.yaml train.epochs=oops"])
    out = pipeline(bad, tmp_path / "run")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert "train.epochs" in out.stderr and not (tmp_path / "run" / "logs" / "data.log").exists()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> tuple[Path, Path]:
    """data -> stage1 -> features once; the stage-three runs below start from copies of it."""
    tmp = tmp_path_factory.mktemp("pipeline")
    config = tiny_config(tmp, feature_sets=["cap"])
    out = pipeline(config, tmp / "base", "--to", "features", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return config, tmp / "base"


def copies(base: Path, *dests: Path) -> tuple[Path, ...]:
    """Independent copies of the finished upstream run, one per scenario."""
    for dest in dests:
        shutil.copytree(base, dest)
    return dests


@pytest.mark.timeout(900)
def test_a_kill_in_stage_three_then_rerun_gives_the_uninterrupted_tables(upstream, tmp_path):
    """Deterministic: the first XE run dies abruptly after step 6 (``train.stop_after_steps``: no clean-up,
    no checkpoint), its last checkpoint is step 4, so the rerun replays steps 5 and 6."""
    config, base = upstream
    whole, killed = copies(base, tmp_path / "whole", tmp_path / "killed")

    out = pipeline(config, whole, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    for stage in ("data", "stage1", "features"):  # a copied run keeps its finished stages
        assert f"[{stage}] complete, skipped" in out.stdout

    tiny = yaml.safe_load(TINY.read_text())
    dying = tiny_config(tmp_path, feature_sets=["cap"],
                        captioners=[tiny["captioners"][0] + " train.stop_after_steps=6"])
    out = pipeline(dying, killed, timeout=600)
    assert out.returncode != 0 and out.stderr.startswith("error: stage captioners failed"), out.stderr
    state = __import__("torch").load(killed / "captioners" / "cap_att2all2" / "last.pt", weights_only=True)
    assert state["step"] == 4 and not state["done"]  # older than the kill: steps 5 and 6 are lost
    assert not (killed / ".pipeline" / "captioners.done").exists()

    out = pipeline(config, killed, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[captioners] running" in out.stdout
    assert table_rows(killed) == table_rows(whole)
    assert [r["training"] for r in table_rows(whole)] == ["XE", "RL"]
    # every study and captioner run left the manifest the report reads (capcore/run_layout.py)
    studies = [read_manifest(RunDir(whole).study_manifest(table.parent.name), StudyManifest)
               for table in RunDir(whole).results_root.glob("*/retrieval.json")]
    assert studies and all(m is not None and (whole / m.study_dir / "retrieval").is_dir() for m in studies)
    runs = [read_manifest(CaptionerDir(Path(r["preds"]).parent).manifest, CaptionerManifest)
            for r in json.loads(RunDir(whole).captioning_json.read_text())["rows"]]
    assert [m.stage for m in runs] == ["xe", "rl"] and all((whole / m.features).is_file() for m in runs)

    again = pipeline(config, killed, timeout=120)  # everything complete: nothing runs
    assert again.returncode == 0 and "running" not in again.stdout
    assert again.stdout.count("complete, skipped") == 7
    assert "### Captioning" in again.stdout  # the final tables are printed


@pytest.mark.timeout(600)
def test_from_to_force_reruns_only_that_range(upstream, tmp_path):
    config, base = upstream
    run = tmp_path / "run"
    shutil.copytree(base, run)
    before = (run / "features" / "cap.h5").stat().st_mtime_ns
    stage1 = (run / "caption" / "methods").stat().st_mtime_ns
    out = pipeline(config, run, "--from", "features", "--to", "features", "--force", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[features] running" in out.stdout and "[stage1]" not in out.stdout and "[captioners]" not in out.stdout
    assert (run / "features" / "cap.h5").stat().st_mtime_ns != before
    assert (run / "caption" / "methods").stat().st_mtime_ns == stage1


@pytest.mark.timeout(900)
def test_two_jobs_give_the_one_job_table_and_table1_seeds_aggregates_it(upstream, tmp_path):
    config, base = upstream
    one, two = copies(base, tmp_path / "one", tmp_path / "two")
    assert pipeline(config, one, "--to", "scores", timeout=600).returncode == 0
    config2 = tiny_config(tmp_path, feature_sets=["cap", "img"], jobs=2)
    out = pipeline(config2, two, "--to", "scores", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    rows = table_rows(two)
    assert [r for r in rows if r["features"] == "Cap"] == table_rows(one)  # 2 at a time = one at a time
    for stage in ("captioners", "rl"):  # every command's output reached the stage log
        log = (two / "logs" / f"{stage}.log").read_text()
        assert log.count("$ bash scripts/stage3_") == 2 and not list((two / "logs").glob("*.part*"))

    seeds = subprocess.run(["bash", "scripts/table1_seeds.sh", str(config2), str(two), "0", "1",
                            "--machine", "test"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert seeds.returncode == 0, seeds.stdout + seeds.stderr
    result = json.loads((two / "results" / "captioning_seeds" / "captioning_seeds.json").read_text())
    assert result["n_seeds"] == 2 and len(result["cells"]) == 4 and len(result["paired"]) == 2
    seed0 = json.loads((two / "results" / "captioning_seeds" / "s0" / "captioning.json").read_text())["rows"]
    assert [r["C"] for r in seed0] == [r["C"] for r in rows]  # seed 0 is the pipeline's own run
    cell = result["cells"][0]
    assert cell["C"]["values"][0] == rows[0]["C"] and (two / "seeds" / "s1" / "captioners").is_dir()
    assert "Cap − Img" in (two / "results" / "captioning_seeds" / "captioning_seeds.md").read_text()
