"""studies/provenance.py (issue #65): a study's new record carries the commit that computed it and whether the
checkout's tracked files differed from it; outside a git checkout it says it does not know."""
from __future__ import annotations

import json
import subprocess

import numpy as np

from studies.provenance import ROOT, computed_at, with_commit


def git(root, *args) -> str:
    return subprocess.run(["git", "-C", str(root), "-c", "user.name=t", "-c", "user.email=t@t", *args],
                          capture_output=True, check=True, text=True).stdout


def test_the_commit_and_the_dirty_flag_of_a_checkout(tmp_path):
    git(tmp_path, "init", "-q")
    (tmp_path / "code.py").write_text("x = 1\n")
    git(tmp_path, "add", "code.py")
    git(tmp_path, "commit", "-qm", "first")
    head = git(tmp_path, "rev-parse", "HEAD").strip()
    assert computed_at(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "notes.txt").write_text("untracked files do not make it dirty\n")
    assert computed_at(tmp_path) == {"commit": head, "dirty": False}
    (tmp_path / "code.py").write_text("x = 2\n")  # a tracked file edited after the commit
    assert computed_at(tmp_path) == {"commit": head, "dirty": True}
    record = with_commit({"mean": 0.033}, tmp_path)
    assert record == {"mean": 0.033, "computed_at": {"commit": head, "dirty": True}}
    assert json.loads(json.dumps(record)) == record  # what a study writes as JSON


def test_outside_a_checkout_the_commit_is_unknown(tmp_path):
    assert computed_at(tmp_path / "not_a_checkout") == {"commit": "", "dirty": None}


def test_a_new_trunk_record_carries_the_commit_that_wrote_it_and_an_old_one_reads_without(tmp_path):
    """studies.table1_pooled.trunk_record.write_record adds this checkout's commit; the five records kept before
    issue #65 have none and read as "" (the pooled table does not read it: its byte-for-byte test)."""
    from studies.table1_pooled.trunk_record import RECORDS, TrunkRecord, read_record, write_record

    record = TrunkRecord(3, [301], ["Img", "Cap"], np.arange(4), np.zeros((1, 2, 2, 2)),
                         np.zeros((1, 2, 2, 2, 4), np.float32), "test CPU", 1.0)
    kept = read_record(write_record(record, tmp_path))
    want = computed_at(ROOT)
    assert want["commit"] and len(want["commit"]) == 40  # this checkout is a git checkout
    assert (kept.commit, kept.dirty) == (want["commit"], want["dirty"])
    assert read_record(RECORDS / "trunk_10.npz").commit == ""  # kept before the commit was recorded
