"""The captioning study's declaration (issue #46): the shipped file loads and says what docs/declaration.md
says; a broken one is refused in one line; results are held against it key by key."""
from __future__ import annotations

import pytest

from capcore.errors import CapawareError
from studies.declaration import DEFAULT, load_declaration, results_follow, stamp


def test_the_shipped_declaration_names_the_four_primary_cells_the_trunk_unit_and_holm():
    decl = load_declaration()
    assert [(c.model, c.training, c.features, c.baseline) for c in decl.primary] == [
        ("Att2all2", "XE", "Cap", "Img"), ("Att2all2", "RL", "Cap", "Img"),
        ("Top-Down", "XE", "Cap", "Img"), ("Top-Down", "RL", "Cap", "Img")]
    assert decl.unit == "trunk" and len(decl.trunks) >= 3 and decl.family == "holm" and decl.alpha == 0.05
    assert {"Cap-shuffled", "Img-adapted"} <= set(decl.feature_sets)


@pytest.mark.parametrize("change, key", [("unit: seed", "unit"), ("trunks: [0, 1]", "trunks"),
                                         ("family: none", "family"), ("test: welch", "test")])
def test_a_declaration_that_breaks_the_design_is_refused_naming_the_key(tmp_path, change, key):
    text = DEFAULT.read_text()
    field = change.split(":")[0]
    lines = [change if line.startswith(f"{field}:") else line for line in text.splitlines()]
    bad = tmp_path / "declaration.yaml"
    bad.write_text("\n".join(lines))
    with pytest.raises(CapawareError, match=key):
        load_declaration(bad)


def test_results_are_held_against_the_declaration_key_by_key():
    decl = load_declaration()
    good = {"declared": stamp(decl), "ran": {"trunks": list(decl.trunks), "captioner_seeds": list(decl.captioner_seeds),
                                             "test_images": decl.test_images}}
    assert results_follow(good, decl) == []
    fewer = {**good, "ran": {**good["ran"], "trunks": list(decl.trunks)[:2]}}
    assert results_follow(fewer, decl) == [f"ran trunks {list(decl.trunks)[:2]!r}, declared {list(decl.trunks)!r}"]
    other = {**good, "declared": {**good["declared"], "family": "bonferroni", "declaration_sha256": "0" * 64}}
    problems = results_follow(other, decl)
    assert len(problems) == 2 and any(p.startswith("family:") for p in problems)


def test_the_committed_table_1_over_trunks_was_produced_under_the_declaration():
    """docs/study_results/table1_trunks.json is the file `make study-trunks` wrote for docs/results.md: its stamp
    (the declaration's sha256, trunks, seeds, test images, test, family, primary cells) and what actually ran
    match the declaration in the repository, key by key."""
    import json

    from studies.declaration import DEFAULT, load_declaration, results_follow

    path = DEFAULT.parents[3] / "docs" / "study_results" / "table1_trunks.json"
    results = json.loads(path.read_text())
    assert results_follow(results, load_declaration()) == []
    assert results["ran"] == {"trunks": [0, 1, 2], "captioner_seeds": [0, 1], "test_images": 1000}
    assert len(results["primary"]) == 4 and all("holm" in c for c in results["primary"])
