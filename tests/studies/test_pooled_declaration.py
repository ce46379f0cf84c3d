"""studies/table1_pooled/configs/declaration_table1_pooled.yaml and its stamp (issue #56): the stamp covers every
file that defines an arm, so changing one after the declaration breaks it; the declaration loads and names its arms."""
from __future__ import annotations

import json
import shutil
import subprocess

import pytest
import yaml

from capcore.errors import CapawareError
from studies.table1_pooled.declaration import (DEFAULT, ROOT, closed, declaration_stamp, load_declaration,
                                               stamp_at_commit)
from studies.table1_pooled.trunk_record import read_record


def test_the_stamp_covers_the_arm_files(tmp_path):
    decl = yaml.safe_load(DEFAULT.read_text())
    for name in decl["arm_files"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    copy = tmp_path / "declaration.yaml"
    shutil.copy(DEFAULT, copy)
    before = declaration_stamp(copy, tmp_path)
    assert before == declaration_stamp(DEFAULT, ROOT)  # the same bytes, wherever they lie
    for name in decl["arm_files"]:  # one changed arm file, any of them, breaks the stamp
        original = (tmp_path / name).read_bytes()
        (tmp_path / name).write_bytes(original + b"\n# changed after the declaration\n")
        assert declaration_stamp(copy, tmp_path) != before, name
        (tmp_path / name).write_bytes(original)
    assert declaration_stamp(copy, tmp_path) == before
    copy.write_text(copy.read_text().replace("equivalence_margin: 0.02", "equivalence_margin: 0.03"))
    assert declaration_stamp(copy, tmp_path) != before


KEPT = (ROOT / "studies" / "table1_pooled" / "declared_stamp.txt").read_text().split()[0]


def test_the_arm_files_are_byte_for_byte_as_declared_while_the_study_is_open():
    """The stamp the study runs under, kept in studies/table1_pooled/declared_stamp.txt (computed at 52dc97e, the
    last change before trunk 10's first sitting, 2026-11-29T00:41Z): while the study is open, any edit to an arm
    file, even to a message, fails here, in make test, before it can reach a trunk."""
    done = closed()
    if done is None:
        assert declaration_stamp() == KEPT, ("an arm file (the declaration's arm_files) changed after the "
                                             "declaration: restore it byte for byte")
    else:  # closed: the files may have moved on; the closing commit's files must give the stamp
        assert done.stamp == KEPT
        try:
            at_close = stamp_at_commit(done.commit, done.declaration)
        except subprocess.CalledProcessError:
            pytest.skip(f"this checkout's git history lacks the closing commit {done.commit[:7]} (a shallow clone)")
        assert at_close == KEPT


def test_every_kept_record_and_the_table_carry_the_declared_stamp():
    records = ROOT / "docs" / "study_results" / "table1_pooled"
    kept = sorted(records.glob("trunk_*.npz"))
    assert kept, "no kept trunk"
    assert {path.name: read_record(path).stamp for path in kept} == {path.name: KEPT for path in kept}
    table = records / "table1_pooled.json"
    if closed() is not None:
        assert json.loads(table.read_text())["declared"]["stamp_sha256"] == KEPT


def test_a_closed_study_checks_its_stamp_against_the_closing_commit_not_todays_files(tmp_path):
    """stamp_at_commit reads the closing commit's bytes from git: a file moved or edited after the close changes
    today's stamp but not the closing one, and an edit before the close changes both."""
    def git(*args):
        return subprocess.run(["git", "-C", str(tmp_path), *args], capture_output=True, check=True, text=True).stdout
    git("init", "-q")
    (tmp_path / "arm.yaml").write_text("lr: 0.1\n")
    (tmp_path / "declaration.yaml").write_text("name: t\narm_files: [arm.yaml]\n")
    git("add", "-A")
    git("-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "declared")
    commit = git("rev-parse", "HEAD").strip()
    at_close = declaration_stamp(tmp_path / "declaration.yaml", tmp_path)
    assert stamp_at_commit(commit, "declaration.yaml", tmp_path) == at_close
    (tmp_path / "arm.yaml").write_text("lr: 0.2\n")  # after the close
    assert declaration_stamp(tmp_path / "declaration.yaml", tmp_path) != at_close
    assert stamp_at_commit(commit, "declaration.yaml", tmp_path) == at_close
    with pytest.raises(subprocess.CalledProcessError):  # a commit the history lacks
        stamp_at_commit("0" * 40, "declaration.yaml", tmp_path)


def test_the_declaration_names_its_arms_seeds_and_files():
    decl = load_declaration()
    assert decl.primary.name() == "Cap − Img" and len(decl.pooled_over) == 4
    assert {"Img", "Cap", "Img-kinds", "Img-self", "Oracle"} == set(decl.arms)
    assert decl.known_effect.name() == "Oracle − Img"
    for must in ("embedder/row_labels.py", "embedder/labels/floor.py", "embedder/labels/frozen_embedding.py",
                 "studies/table1_pooled/configs/pooled_caption.yaml",
                 "studies/table1_pooled/configs/pipeline_table1_pooled.yaml"):
        assert must in decl.arm_files, must
    seeds = [s for t in decl.design.trunks for s in decl.captioner_seeds_of(t)]
    assert len(set(seeds)) == len(seeds) and 0 not in seeds  # nested: no two trunks share a captioner seed


def test_a_declaration_missing_an_arm_file_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "declaration.yaml"
    bad.write_text(DEFAULT.read_text().replace("embedder/row_labels.py", "embedder/no_such_file.py"))
    with pytest.raises(CapawareError, match="arm_files"):
        load_declaration(bad)
