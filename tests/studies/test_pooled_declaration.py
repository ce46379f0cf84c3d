"""configs/study/declaration_table1_pooled.yaml and its stamp (issue #56): the stamp covers every file that
defines an arm, so changing one after the declaration breaks it; the declaration loads and names its arms."""
from __future__ import annotations

import shutil

import pytest
import yaml

from capcore.errors import CapawareError
from studies.table1_pooled.declaration import DEFAULT, ROOT, declaration_stamp, load_declaration


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


def test_the_arm_files_are_byte_for_byte_as_declared():
    """The stamp the study runs under, kept in studies/table1_pooled/declared_stamp.txt (computed at 52dc97e, the
    last change before trunk 10's first sitting, 2026-11-29T00:41Z): any edit to an arm file, even to a message,
    fails here, in make test, before it can reach a trunk."""
    kept = (ROOT / "studies" / "table1_pooled" / "declared_stamp.txt").read_text().split()[0]
    assert declaration_stamp() == kept, ("an arm file (configs/study/declaration_table1_pooled.yaml, arm_files) "
                                         "changed after the declaration: restore it byte for byte")


def test_the_declaration_names_its_arms_seeds_and_files():
    decl = load_declaration()
    assert decl.primary.name() == "Cap − Img" and len(decl.pooled_over) == 4
    assert {"Img", "Cap", "Img-kinds", "Img-self", "Oracle"} == set(decl.arms)
    assert decl.known_effect.name() == "Oracle − Img"
    for must in ("embedder/row_labels.py", "embedder/labels/floor.py", "embedder/labels/frozen_embedding.py",
                 "configs/study/pooled_caption.yaml", "configs/study/pipeline_table1_pooled.yaml"):
        assert must in decl.arm_files, must
    seeds = [s for t in decl.design.trunks for s in decl.captioner_seeds_of(t)]
    assert len(set(seeds)) == len(seeds) and 0 not in seeds  # nested: no two trunks share a captioner seed


def test_a_declaration_missing_an_arm_file_is_refused_in_one_line(tmp_path):
    bad = tmp_path / "declaration.yaml"
    bad.write_text(DEFAULT.read_text().replace("embedder/row_labels.py", "embedder/no_such_file.py"))
    with pytest.raises(CapawareError, match="arm_files"):
        load_declaration(bad)
