"""studies.trunks.trunk_table (issue #46): Table 1 over trunks from per-seed tables, against a hand computation;
its JSON follows the declaration; a missing trunk is one line."""
from __future__ import annotations

import json

import numpy as np
import pytest

from capcore.errors import CapawareError
from studies.declaration import DEFAULT, load_declaration, results_follow
from studies.trunks.trunk_stats import Components, holm, images_needed
from studies.trunks.trunk_table import main

FEATURES = ("Img", "Cap", "Cap-shuffled", "Img-adapted")
IMAGES = list(range(500, 530))


def fake_study(root, trunks=(0, 1, 2), seeds=(0, 1), variant="", features=FEATURES, cap_lift=0.05, seed=0):
    """Per-image CIDEr-D drawn so that Cap beats Img by a trunk-dependent amount; C is each run's image mean.
    ``variant``: the subfolder of each trunk the tables go to (``raw``: the standardisation check)."""
    rng = np.random.default_rng(seed)
    truth = {}
    for t in trunks:
        for s in seeds:
            rows = []
            for model in ("Att2all2", "Top-Down"):
                for training in ("XE", "RL"):
                    base = rng.uniform(0.4, 1.2, len(IMAGES))
                    for feats in features:
                        lift = {"Cap": cap_lift + 0.02 * t, "Cap-shuffled": 0.01, "Img-adapted": 0.02}.get(feats, 0.0)
                        scores = base + lift + rng.normal(0, 0.05, len(IMAGES))
                        run = root / f"t{t}" / variant / f"s{s}" / f"{model}_{feats}_{training}"
                        run.mkdir(parents=True)
                        (run / "per_image_test.json").write_text(json.dumps(
                            [{"image_id": i, "CIDEr-D": float(c)} for i, c in zip(IMAGES, scores)]))
                        rows.append({"model": model, "features": feats, "training": training, "C": float(scores.mean()),
                                     "metrics_file": str(run / "metrics_test.json"), "split": "test"})
                        truth[(t, s, model, feats, training)] = float(scores.mean())
            table = root / f"t{t}" / variant / "results" / "table1" / f"s{s}" / "captioning.json"
            table.parent.mkdir(parents=True)
            table.write_text(json.dumps({"rows": rows}))
    return truth


def declaration(tmp_path):
    text = DEFAULT.read_text()
    text = text.replace("test_images: 1000", f"test_images: {len(IMAGES)}")
    path = tmp_path / "declaration_table1.yaml"
    path.write_text(text)
    return path


def test_the_trunk_table_tests_trunk_means_and_applies_holm_to_the_primary_cells(tmp_path):
    run = tmp_path / "run"
    truth = fake_study(run)
    decl_path = declaration(tmp_path)
    decl = load_declaration(decl_path)
    assert list(decl.trunks) == [0, 1, 2] and list(decl.captioner_seeds) == [0, 1]
    main([str(run), "--declaration", str(decl_path)])
    result = json.loads((run / "results" / "trunks" / "table1_trunks.json").read_text())
    primary = result["primary"]
    assert [(c["model"], c["training"]) for c in primary] == [("Att2all2", "XE"), ("Att2all2", "RL"),
                                                              ("Top-Down", "XE"), ("Top-Down", "RL")]
    for c in primary:
        want = [np.mean([truth[(t, s, c["model"], "Cap", c["training"])]
                         - truth[(t, s, c["model"], "Img", c["training"])]
                         for s in (0, 1)]) for t in (0, 1, 2)]
        assert c["test"]["trunk_means"] == pytest.approx(want) and c["test"]["df"] == 2
        if c["combined"]:
            assert c["combined"]["df"] <= 2 and c["combined"]["p"] >= c["test"]["p"] - 1e-12
        comps = Components(c["components"]["trunk"], c["components"]["seed"], c["components"]["image"],
                           c["components"]["n_images"])
        assert c["images_for_02"] == images_needed(0.02, comps, trunks=3, seeds=2)
    rejected, adjusted = holm([c["test"]["p"] for c in primary])
    assert [c["holm"]["rejected"] for c in primary] == rejected
    assert [c["holm"]["adjusted_p"] for c in primary] == pytest.approx(adjusted)
    secondary = {(c["features"], c["baseline"]) for c in result["secondary"]}
    assert ("Cap", "Cap-shuffled") in secondary and ("Img-adapted", "Img") in secondary
    assert all("holm" not in c for c in result["secondary"])
    assert results_follow(result, decl, decl_path) == []
    text = (run / "results" / "trunks" / "table1_trunks.md").read_text()
    assert "Table 1 over 3 stage-one trunks" in text and "secondary: no verdict" in text
    assert result["standardised_check"] is None and "Not run yet" in text


def test_the_standardisation_check_retests_the_primary_cells_from_the_raw_captioners(tmp_path):
    run = tmp_path / "run"
    fake_study(run, cap_lift=0.3)  # large enough for Holm to reject every standardised cell
    raw = fake_study(run, variant="raw", features=("Img", "Cap"), cap_lift=-0.01, seed=1)
    decl_path = declaration(tmp_path)
    main([str(run), "--declaration", str(decl_path)])
    result = json.loads((run / "results" / "trunks" / "table1_trunks.json").read_text())
    check = result["standardised_check"]
    assert [(c["model"], c["training"]) for c in check["cells"]] == [(c["model"], c["training"])
                                                                     for c in result["primary"]]
    for c, std in zip(check["cells"], result["primary"]):
        want = [np.mean([raw[(t, s, c["model"], "Cap", c["training"])] - raw[(t, s, c["model"], "Img", c["training"])]
                         for s in (0, 1)]) for t in (0, 1, 2)]
        assert c["test"]["trunk_means"] == pytest.approx(want)
        sign = lambda cell: "=" if not cell["holm"]["rejected"] else ("+" if cell["test"]["mean"] > 0 else "-")
        assert c["same_decision"] == (sign(c) == sign(std))
    rejected, adjusted = holm([c["test"]["p"] for c in check["cells"]])
    assert [c["holm"]["adjusted_p"] for c in check["cells"]] == pytest.approx(adjusted)
    assert all(c["holm"]["rejected"] for c in result["primary"])
    assert not any(c["same_decision"] for c in check["cells"]) and check["verdict_unchanged"] is False
    text = (run / "results" / "trunks" / "table1_trunks.md").read_text()
    assert "The standardisation check" in text and "inputs changes the primary verdict" in text


def test_a_missing_trunk_is_one_line_naming_the_command_that_makes_it(tmp_path):
    run = tmp_path / "run"
    fake_study(run, trunks=(0, 1))
    with pytest.raises(CapawareError, match="trunk 2, captioner seed 0 has no Table 1 yet"):
        main([str(run), "--declaration", str(declaration(tmp_path))])
