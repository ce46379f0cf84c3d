"""studies/table1_pooled/trunk_record.py and pooled_table.py on a made-up study whose effects are known (issue
#56): the kept trunk records (per-image scores, round trip), the pooled contrast, the known-effect check, the
cells with Holm, and the variance components recomputed from the kept per-image scores."""
from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from studies.table1_pooled.declaration import MODELS, TRAINING, declaration_stamp, load_declaration
from studies.table1_pooled.pooled_stats import sign_flip_p
from studies.table1_pooled.pooled_table import main
from studies.table1_pooled.trunk_record import main as keep
from studies.table1_pooled.trunk_record import read_record
from studies.trunks.trunk_stats import components

ARMS = {"Img": 0.0, "Cap": 0.03, "Img-kinds": 0.01, "Img-self": 0.0, "Oracle": 0.5}  # true effects on CIDEr-D
TRUNKS, IMAGES = [0, 1, 2, 3], 50


def declaration(tmp_path):
    decl = {"name": "pooled_test", "declared": "2026-11-28", "primary": {"features": "Cap", "baseline": "Img"},
            "pooled_over": [[m, t] for m in MODELS for t in TRAINING],
            "secondary": [{"features": "Cap", "baseline": "Img-self"}, {"features": "Img-kinds", "baseline": "Img"}],
            "known_effect": {"features": "Oracle", "baseline": "Img"},
            "design": {"trunks": TRUNKS, "seeds_per_trunk": 2, "test_images": IMAGES, "val_images": 10},
            "promise": {"effect": 0.03, "power": 0.8, "detectable": 0.03, "cpu_hours": 1.0},
            "arms": {a: a for a in ARMS}, "arm_files": ["embedder/row_labels.py"]}
    path = tmp_path / "declaration.yaml"
    path.write_text(yaml.safe_dump(decl, sort_keys=False))  # the arms in their declared order
    return path


def write_run(run, decl) -> np.ndarray:
    """Per-image CIDEr-D = image + arm effect + trunk + run noise; returns [trunk, seed, arm, model, train, image]."""
    rng = np.random.default_rng(0)
    image = rng.uniform(0.3, 1.2, IMAGES)
    scores = np.zeros((len(TRUNKS), 2, len(ARMS), 2, 2, IMAGES), np.float32)
    for ti, t in enumerate(TRUNKS):
        trunk = rng.normal(0, 0.01, len(ARMS))
        for si, s in enumerate(decl.captioner_seeds_of(t)):
            rows = []
            for ai, (arm, effect) in enumerate(ARMS.items()):
                for mi, model in enumerate(MODELS):
                    for ri, training in enumerate(TRAINING):
                        per = image + effect + trunk[ai] + rng.normal(0, 0.05, IMAGES)
                        scores[ti, si, ai, mi, ri] = per
                        folder = run / f"t{t}" / "runs" / f"s{s}_{ai}{mi}{ri}"
                        folder.mkdir(parents=True)
                        (folder / "per_image_test.json").write_text(json.dumps(
                            [{"image_id": 1000 + i, "CIDEr-D": float(v)} for i, v in enumerate(per)]))
                        rows.append({"model": model, "features": arm, "training": training, "split": "test",
                                     "C": float(np.mean(per.astype(np.float32))),
                                     "metrics_file": str(folder / "metrics_test.json")})
            table = run / f"t{t}" / "results" / "table1" / f"s{s}" / "captioning.json"
            table.parent.mkdir(parents=True)
            table.write_text(json.dumps({"rows": rows}))
    return scores


def test_the_pooled_table_tests_the_declared_contrast_and_keeps_what_recomputes_it(tmp_path, capsys):
    path = declaration(tmp_path)
    decl = load_declaration(path)
    truth = write_run(tmp_path / "run", decl)
    records = tmp_path / "records"
    (tmp_path / "run" / f"t{TRUNKS[0]}" / "logs").mkdir(parents=True)  # the first sitting's header, as pipeline.sh
    (tmp_path / "run" / f"t{TRUNKS[0]}" / "logs" / "data.log").write_text(  # writes it
        "# 2026-11-29T00:41:00Z stage data, fingerprint 4dc9a5be15fe510c\n$ python -m capaware.stage data ...\n")
    for t in TRUNKS:
        keep([str(tmp_path / "run"), str(t), "--machine", "test CPU", "--seconds", "12", "--declaration", str(path),
              "--records", str(records)])
    kept = [read_record(records / f"trunk_{t}.npz") for t in TRUNKS]  # round trip of what the repository keeps
    assert np.array_equal(np.stack([r.per_image for r in kept]), truth) and kept[0].arms == list(ARMS)
    assert kept[2].seeds == [201, 202] and kept[1].machine == "test CPU" and kept[1].seconds == 12
    assert (kept[0].started, kept[1].started) == ("2026-11-29T00:41:00Z", "")
    assert kept[0].stamp == declaration_stamp(path) and len(kept[0].stamp) == 64  # what the trunk ran under

    main(["--records", str(records), "--declaration", str(path)])
    result = json.loads((records / "table1_pooled.json").read_text())
    cap, img = list(ARMS).index("Cap"), list(ARMS).index("Img")
    per_trunk = truth[:, :, cap].mean(axis=(1, 2, 3, 4)) - truth[:, :, img].mean(axis=(1, 2, 3, 4))
    assert result["primary"]["values"] == pytest.approx(per_trunk.tolist(), abs=1e-6)
    # issue #65: beside every t-test's p, the exact sign-flip p of the same trunk values (floor 2 / 2^4 here)
    assert result["primary"]["sign_flip_p"] == sign_flip_p(result["primary"]["values"]) >= 2 / 2 ** len(TRUNKS)
    assert all(c["sign_flip_p"] == sign_flip_p(c["values"]) for c in [*result["cells"], *result["secondary"]])
    assert result["primary"]["contrast"] == "Cap − Img" and result["primary"]["df"] == 3
    assert result["known_effect"]["mean"] == pytest.approx(0.5, abs=0.05) and result["known_effect"]["p"] < 0.05
    assert [(c["model"], c["training"]) for c in result["cells"]] == [tuple(c) for c in decl.pooled_over]
    assert all(c["holm_p"] >= c["p"] for c in result["cells"])
    assert [s["contrast"] for s in result["secondary"]] == ["Cap − Img-self", "Img-kinds − Img"]
    assert result["ran"]["test_images"] == IMAGES and result["declared"]["stamp_sha256"]
    assert "Known-effect check, Oracle − Img**: detected" in (records / "table1_pooled.md").read_text()
    cell = [list(c) for c in decl.pooled_over].index(["Top-Down", "RL"])  # the scale: each arm's mean per cell
    assert result["scale"]["Cap"][cell] == pytest.approx(truth[:, :, cap, 1, 1].mean(), abs=1e-5)

    runs = np.stack([r.per_image for r in kept]).mean(axis=-1)  # each run's score is its images' mean (CIDEr-D is)
    pooled_runs = (runs[:, :, cap] - runs[:, :, img]).mean(axis=(2, 3))  # [trunk, seed] over the four cells
    assert np.allclose(pooled_runs, result["primary"]["runs"], atol=1e-6)
    recomputed = components(pooled_runs.tolist())
    assert result["primary"]["components"]["trunk"] == pytest.approx(recomputed.trunk, rel=1e-4, abs=1e-12)
    assert result["primary"]["components"]["seed"] == pytest.approx(recomputed.seed, rel=1e-4, abs=1e-12)


def test_a_missing_trunk_names_the_command_that_resumes_it(tmp_path):
    from capcore.errors import CapawareError

    path = declaration(tmp_path)
    with pytest.raises(CapawareError, match="study_pooled.sh"):
        keep([str(tmp_path / "empty"), "0", "--machine", "x", "--seconds", "1", "--declaration", str(path),
              "--records", str(tmp_path / "records")])
    with pytest.raises(CapawareError, match="not kept yet"):
        main(["--records", str(tmp_path / "records"), "--declaration", str(path)])


def test_a_trunk_kept_under_another_stamp_is_refused(tmp_path):
    from capcore.errors import CapawareError

    path = declaration(tmp_path)
    write_run(tmp_path / "run", load_declaration(path))
    for t in TRUNKS:
        keep([str(tmp_path / "run"), str(t), "--machine", "x", "--seconds", "1", "--declaration", str(path),
              "--records", str(tmp_path / "records")])
    path.write_text(path.read_text().replace("effect: 0.03", "effect: 0.02"))  # the declaration changed after
    with pytest.raises(CapawareError, match="not the declaration's"):
        main(["--records", str(tmp_path / "records"), "--declaration", str(path)])


def test_the_committed_pooled_table_recomputes_from_the_kept_records(tmp_path):
    """Issue #56's bookkeeping: docs/study_results/table1_pooled/table1_pooled.{json,md} are what the command
    writes from the five kept trunk records alone, to the byte."""
    from studies.table1_pooled.declaration import ROOT

    records = ROOT / "docs" / "study_results" / "table1_pooled"
    if not (records / "table1_pooled.json").is_file():
        pytest.skip("the pooled table is not written yet (the study is open)")
    main(["--records", str(records), "--out", str(tmp_path)])
    for name in ("table1_pooled.json", "table1_pooled.md"):
        assert (tmp_path / name).read_bytes() == (records / name).read_bytes(), name
    primary = json.loads((records / "table1_pooled.json").read_text())["primary"]
    assert primary["p"] < 0.05 and primary["sign_flip_p"] == 2 / 2 ** 5  # issue #65: five trunks, all positive
