"""scripts/pipeline.sh with two commands at a time gives the one-at-a-time tables, and
studies/table1_seeds/table1_seeds.sh
aggregates its seeds (a file of its own, so that pytest-xdist runs it beside tests/capaware/test_pipeline.py)."""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from tests.pipeline_helpers import ROOT, build_upstream, copies, env, pipeline, table_rows, tiny_config


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> tuple[Path, Path]:
    return build_upstream(tmp_path_factory.mktemp("pipeline_jobs"))


@pytest.mark.integration  # 107 s on a 2-vCPU Intel Xeon; make test runs two data commands at a time (below)
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
        assert log.count("$ python -m capaware.stage ") == 2 and not list((two / "logs").glob("*.part*"))

    seeds = subprocess.run(["bash", "studies/table1_seeds/table1_seeds.sh", str(config2), str(two), "0", "1",
                            "--machine", "test"], cwd=ROOT, env=env(), capture_output=True, text=True, timeout=600)
    assert seeds.returncode == 0, seeds.stdout + seeds.stderr
    result = json.loads((two / "results" / "captioning_seeds" / "captioning_seeds.json").read_text())
    assert result["n_seeds"] == 2 and len(result["cells"]) == 4 and len(result["paired"]) == 2
    seed0 = json.loads((two / "results" / "captioning_seeds" / "s0" / "captioning.json").read_text())["rows"]
    assert [r["C"] for r in seed0] == [r["C"] for r in rows]  # seed 0 is the pipeline's own run
    cell = result["cells"][0]
    assert cell["C"]["values"][0] == rows[0]["C"] and (two / "seeds" / "s1" / "captioners").is_dir()
    assert "Cap − Img" in (two / "results" / "captioning_seeds" / "captioning_seeds.md").read_text()


def test_commands_run_at_once_get_one_gpu_each_never_all_gpu_0(tmp_path):
    """Two data commands at a time with two (fake) visible devices: each command's own environment, which it
    writes to its log, names a different one; with one device, or one job at a time, nothing is assigned."""
    for devices, jobs, want in (("0,1", 2, {"0", "1"}), ("0", 2, set()), ("3,5", 1, set())):
        config = tiny_config(tmp_path, jobs=jobs)
        run = tmp_path / f"run_{devices}_{jobs}"
        e = dict(env(), CUDA_VISIBLE_DEVICES=devices)
        out = subprocess.run(["bash", "scripts/pipeline.sh", str(config), "--run", str(run), "--to", "data"],
                             cwd=ROOT, env=e, capture_output=True, text=True, timeout=300)
        assert out.returncode == 0, out.stdout + out.stderr
        seen = [line.split("=", 1)[1] for line in (run / "logs" / "data.log").read_text().splitlines()
                if line.startswith("# CUDA_VISIBLE_DEVICES=")]
        assert sorted(seen) == sorted(want), (devices, jobs, seen)
