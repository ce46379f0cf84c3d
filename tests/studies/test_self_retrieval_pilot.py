"""studies/self_retrieval/run_pilot.py (issue #66's pilot, on val): the jobs it would run (the two arms differ only by
the retrieval term, both start from the seed's XE run, decode val, never test), the record read from a run folder
written by hand (best.pt's validation is the best eligible one), and the table's paired differences."""
import json
import shlex
from pathlib import Path

import pytest

from studies.self_retrieval import run_pilot as pilot


def test_the_arms_differ_only_by_the_retrieval_term_and_read_val(tmp_path):
    run = tmp_path / "run"
    (base_cmd, base_out), (sr_cmd, sr_out) = (pilot.scst_job(run, arm, 1, "topdown") for arm in ("baseline", "sr_fl"))
    base, sr = (shlex.split(c.split(" && ")[0]) for c in (base_cmd, sr_cmd))
    extra = [w for w in sr if w not in base]
    assert extra == [f"out_dir={sr_out}", "retrieval.weight=1", f"retrieval.model={run}/joint/img/best.pt"]
    assert f"init={run}/seeds/s1/captioners/img_topdown/best.pt" in base and "seed=1" in base
    assert "--split val" in base_cmd and "--split test" not in base_cmd and "test" not in base_out.name
    assert pilot.xe_dir(run, 0, "att2all2") == run / "captioners" / "img_att2all2"  # seed 0: the demo's own XE


def test_the_record_takes_best_pts_validation_and_the_table_pairs_the_arms(tmp_path):
    run = tmp_path / "run"
    for arm, r1, cider in (("baseline", 20.0, 0.80), ("sr_fl", 23.5, 0.79)):
        out = pilot.scst_dir(run, arm, 0, "att2all2")
        out.mkdir(parents=True)
        (out / "self_retrieval_val.json").write_text(json.dumps({"r1": r1, "r5": 60.0, "r10": 80.0, "n_images": 120}))
        history = [{"epoch": 0, "cider_d": 0.7}, {"epoch": 1, "cider_d": cider + 0.05, "eligible": False},
                   {"epoch": 2, "cider_d": cider, "eligible": True}]
        (out / "history.json").write_text(json.dumps(history))
    rows = [pilot.record(run, arm, 0, "att2all2") for arm in ("baseline", "sr_fl")]
    assert [(r["val_r1"], r["val_cider_d"], r["best_epoch"]) for r in rows] == [(20.0, 0.80, 2), (23.5, 0.79, 2)]
    line = next(x for x in pilot.markdown(rows, "cpu").splitlines() if x.startswith("| att2all2"))
    assert [c.strip() for c in line.strip("|").split("|")] == ["att2all2", "0", "20.0", "23.5", "+3.5", "0.800",
                                                                "0.790", "-0.010"]
    assert Path(rows[0]["run"]).name == "img_att2all2"
    with pytest.raises(FileNotFoundError):
        pilot.record(run, "sr_fl", 1, "att2all2")  # a seed not run yet has no record
