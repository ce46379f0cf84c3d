"""The study commands README and docs print, run as written (`make study-trunks`, `make study-positive`) in a copy of
the checkout whose study configs are shrunk to a tiny caption set: each finishes, resumes, and writes the files
the docs point to, stamped with the declaration.

Marked ``studies``: a few minutes on 2 cores, so `make test` leaves them out and `make test-studies` (which CI
runs after it) runs them. The copy holds the tracked files only, as a fresh clone would; the shrinking is done
by appending the tiny pipeline's overrides (tests/fixtures/pipeline_tiny.yaml) to each command of the study's own
pipeline configs, so the study's configs, scripts and Makefile targets are the ones under test.
"""
from __future__ import annotations

import json

import pytest

from tests.pipeline_helpers import STAGE1_TINY, checkout, make, shrink

pytestmark = [pytest.mark.studies, pytest.mark.timeout(1800)]


def test_make_study_trunks_runs_every_declared_trunk_and_writes_table1_over_trunks(tmp_path):
    repo = checkout(tmp_path)
    for name in ("pipeline_trunks.yaml", "pipeline_trunks_raw.yaml"):
        shrink(repo / "studies" / "trunks" / "configs" / name)
    one = make(repo, "study-trunks", "TRUNKS=0")
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]
    assert "trunk 1 not finished: tables over trunks wait" in one.stdout
    out = make(repo, "study-trunks")  # the other trunks, then the tables; trunk 0 resumes as finished
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = repo / "runs" / "trunks"
    result = json.loads((run / "results" / "trunks" / "table1_trunks.json").read_text())
    assert result["ran"]["trunks"] == [0, 1, 2] and len(result["primary"]) == 4
    assert result["standardised_check"] is not None and len(result["standardised_check"]["cells"]) == 4
    assert (run / "results" / "probe" / "probe.md").is_file()
    assert (run / "t2" / "results" / "feature_scale.md").is_file()
    assert (run / "results" / "feature_scale.md").read_text().count("(trunk ") == 12
    timing = (run / "results" / "timing.txt").read_text()
    assert "trunk 0: pipeline to features" in timing and "Table 1 over trunks" in timing


def test_make_study_positive_chooses_a_recipe_and_writes_the_verdict(tmp_path):
    repo = checkout(tmp_path)
    out = make(repo, "study-positive", "EVERY=2", f"POSITIVE_ARGS={STAGE1_TINY}")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = repo / "runs" / "positive"
    verdict = json.loads((run / "results" / "positive_control.json").read_text())
    assert len(verdict["real"]) == len(verdict["shuffled"]) == 3 and verdict["budget"] > 0
    kept = out.stdout.split("recipe kept on val: ")[1].split()[0]
    assert kept in ("layer4_10x", "layer4_30x") and len(list(run.glob(f"{kept}_*/s*/finished"))) == 6
    again = make(repo, "study-positive", "EVERY=2", f"POSITIVE_ARGS={STAGE1_TINY}")  # every run is finished
    assert again.returncode == 0 and "->" not in again.stdout.split("recipe kept")[1]


def test_make_study_table1_keeps_each_trunk_and_writes_the_pooled_table_from_the_records(tmp_path):
    """Issue #56's command, tiny: the plan's design printed first, one trunk run and kept, the table waiting for
    the others. The other four trunks' records are made from the first (its scores shifted per trunk: four more
    tiny trunks would take 20 minutes here); the command then skips every kept trunk and writes the pooled table
    from the records alone."""
    import numpy as np

    from studies.table1_pooled.trunk_record import read_record, write_record

    repo = checkout(tmp_path)
    shrink(repo / "studies" / "table1_pooled" / "configs" / "pipeline_table1_pooled.yaml")
    records = repo / "docs" / "study_results" / "table1_pooled"
    closing = repo / "studies" / "table1_pooled" / "closed.yaml"
    for kept in [*records.glob("trunk_*.npz"), *records.glob("table1_pooled.*"), closing]:
        kept.unlink(missing_ok=True)  # the real study's kept trunks, table and closing: it starts afresh here
    one = make(repo, "study-table1", "TRUNKS=10")
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]
    assert "power plan (declared): 5 trunks x 1 captioner seeds x 5000 test images" in one.stdout
    assert "trunk 11 not kept yet: the table waits" in one.stdout
    first = read_record(records / "trunk_10.npz")
    assert first.seeds == [1001] and first.arms == ["Img", "Cap", "Img-kinds", "Img-self", "Oracle"]
    assert first.per_image.shape[:4] == (1, 5, 2, 2) and first.seconds > 0 and "cores" in first.machine
    for t in (11, 12, 13, 14):
        shift = np.zeros(5)
        shift[1], shift[4] = 0.01 * (t - 12), 0.3  # Cap's difference varies by trunk; Oracle far above
        first.trunk, first.seeds = t, [100 * t + 1]
        first.scores = first.scores + shift[None, :, None, None]
        first.per_image = first.per_image + shift[None, :, None, None, None].astype(np.float32)
        write_record(first, records)
    out = make(repo, "study-table1")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert "trunk 10: kept" in out.stdout and "trunk 14: kept" in out.stdout and "running" not in out.stdout
    result = json.loads((records / "table1_pooled.json").read_text())
    assert result["ran"]["trunks"] == [10, 11, 12, 13, 14] and len(result["cells"]) == 4
    assert result["primary"]["contrast"] == "Cap − Img" and result["known_effect"]["contrast"] == "Oracle − Img"
    assert "**Primary: Cap − Img**" in (records / "table1_pooled.md").read_text()
