"""studies.table1_seeds.results_seeds: Table 1 over seeds, mean ± sd per cell and paired Cap − Img differences."""
import json

import numpy as np
import pytest

from capcore.errors import CapawareError
from studies.table1_seeds.results_seeds import aggregate, image_se, main, paired_test, read_table, verdict


def table(path, c_img, c_cap, b4=0.2):
    rows = []
    for model in ("Att2all2", "Top-Down"):
        for feats, c in (("Img", c_img), ("Cap", c_cap)):
            for training, bonus in (("XE", 0.0), ("RL", 0.1)):
                rows.append({"model": model, "features": feats, "training": training, "B4": b4, "C": c + bonus,
                             "M": 0.2, "R": 0.4, "S": None, "G": 3.0, "D": 0.5, "E": 0.01,
                             "signature": "Standard_sig" if training == "RL" else None})
    path.write_text(json.dumps({"rows": rows}))
    return path


def test_mean_sd_and_paired_differences_match_numpy(tmp_path):
    imgs, caps = [0.50, 0.60, 0.55], [0.70, 0.72, 0.76]
    tables = [read_table(table(tmp_path / f"s{i}.json", a, b)) for i, (a, b) in enumerate(zip(imgs, caps))]
    result = aggregate(tables)
    cell = next(c for c in result["cells"] if (c["model"], c["features"], c["training"]) == ("Att2all2", "Cap", "RL"))
    vals = np.array(caps) + 0.1
    assert cell["C"]["mean"] == pytest.approx(vals.mean()) and cell["C"]["sd"] == pytest.approx(vals.std(ddof=1))
    assert "S" not in cell  # SPICE n/a: no statistic
    assert cell["E"]["mean"] == pytest.approx(0.01) and cell["signature"] == "`Standard_sig`"
    assert "signature" not in next(c for c in result["cells"] if c["training"] == "XE")
    diff = next(d for d in result["paired"] if (d["model"], d["training"]) == ("Top-Down", "XE"))
    d = np.array(caps) - np.array(imgs)
    assert diff["C"]["values"] == pytest.approx(d.tolist()) and diff["C"]["sd"] == pytest.approx(d.std(ddof=1))
    assert diff["B4"]["mean"] == pytest.approx(0.0)
    assert verdict(diff).startswith("Cap > Img (p = ") and "higher with Cap on 3 of 3" in verdict(diff)
    assert len(result["paired"]) == 4


def test_paired_test_matches_scipy_and_the_power_formula():
    from scipy import stats

    d = np.array([0.03, -0.01, 0.05, 0.02, 0.00])
    test = paired_test(d)
    assert test["p"] == pytest.approx(stats.ttest_1samp(d, 0.0).pvalue)
    se = d.std(ddof=1) / np.sqrt(len(d))
    assert test["half_width"] == pytest.approx(stats.t.ppf(0.975, 4) * se)
    # detectable: a true mean of this size is rejected at 5% with 80% power (noncentral t, to the formula's accuracy)
    power = stats.nct.sf(stats.t.ppf(0.975, 4), 4, test["detectable"] / se)
    assert 0.75 < power < 0.85
    assert paired_test([0.1])["detectable"] is None


def test_verdict_says_no_difference_with_what_the_seeds_could_detect():
    mixed = {"C": {"values": [0.1, -0.1, 0.05], "mean": 0.0167, "sd": 0.1}}
    assert (verdict(mixed).startswith("no difference detectable at ± ")
            and "higher with Cap on 2 of 3" in verdict(mixed))
    worse = {"features": "Oracle", "C": {"values": [-0.1, -0.2, -0.15, -0.12], "mean": -0.1425, "sd": 0.04}}
    assert verdict(worse).startswith("Oracle < Img (p = ")


def test_cli_writes_markdown_and_refuses_a_file_that_is_not_a_table(tmp_path, capsys):
    paths = [str(table(tmp_path / f"s{i}.json", 0.5 + i / 10, 0.6)) for i in range(2)]
    main([*paths, "--out", str(tmp_path / "out"), "--machine", "test box"])
    md = (tmp_path / "out" / "captioning_seeds.md").read_text()
    assert "over 2 captioner training seeds" in md and "test box" in md and "± " in md
    saved = json.loads((tmp_path / "out" / "captioning_seeds.json").read_text())
    assert saved["n_seeds"] == 2 and saved["command"].startswith("python -m studies.table1_seeds.results_seeds")
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(CapawareError, match="rows"):
        main([str(bad), "--out", str(tmp_path / "o2")])


def test_the_test_images_add_their_share_of_the_error(tmp_path):
    """image_se from per-image files against numpy; paired_test adds it in quadrature to the seed part."""
    from scipy import stats

    rng = np.random.default_rng(1)
    ids = list(range(100, 140))
    rows = {}
    for feats in ("Img", "Cap"):
        rows[feats] = []
        for seed in range(3):
            run = tmp_path / f"{feats}{seed}"
            run.mkdir()
            scores = rng.uniform(0, 2, len(ids))
            (run / "per_image_test.json").write_text(json.dumps([{"image_id": i, "CIDEr-D": float(c)}
                                                                 for i, c in zip(ids, scores)]))
            rows[feats].append({"metrics_file": str(run / "metrics_test.json"), "split": "test", "scores": scores})
    d = np.mean([c["scores"] - i["scores"] for c, i in zip(rows["Cap"], rows["Img"])], axis=0)
    se_img, n_img = image_se(rows["Cap"], rows["Img"])
    assert se_img == pytest.approx(d.std(ddof=1) / np.sqrt(len(ids))) and n_img == len(ids)
    seeds = [0.02, 0.05, 0.03]
    test = paired_test(seeds, (se_img, n_img))
    seed_var = np.var(seeds, ddof=1) / 3
    assert test["se"] == pytest.approx(np.sqrt(seed_var + se_img ** 2))
    welch = test["se"] ** 4 / (seed_var ** 2 / 2 + se_img ** 4 / (n_img - 1))  # Welch-Satterthwaite
    assert test["df"] == pytest.approx(min(2, welch))  # never more than the seeds replicate
    assert test["half_width"] == pytest.approx(stats.t.ppf(0.975, min(2, welch)) * test["se"])
    rows["Cap"][0]["metrics_file"] = str(tmp_path / "nowhere" / "metrics_test.json")
    assert image_se(rows["Cap"], rows["Img"]) is None


def test_adding_the_images_error_never_lowers_p_below_the_seeds_alone():
    """The case #35 got wrong: a small image error whose Welch-Satterthwaite df (about 7) exceeds the seeds'
    n - 1 = 4. Uncapped, that lowered p from .016 to .010; capped, p can only rise."""
    from scipy import stats

    seeds = [0.03, 0.13, 0.07, 0.11, 0.03]
    alone = paired_test(seeds)
    assert alone["p"] == pytest.approx(stats.ttest_1samp(seeds, 0).pvalue)
    seed_var = np.var(seeds, ddof=1) / 5
    for image in [(0.2 * np.sqrt(seed_var), 1000), (np.sqrt(seed_var), 1000), (3 * np.sqrt(seed_var), 50)]:
        welch = (seed_var + image[0] ** 2) ** 2 / (seed_var ** 2 / 4 + image[0] ** 4 / (image[1] - 1))
        combined = paired_test(seeds, image)
        assert combined["df"] == pytest.approx(min(4, welch)) and combined["df"] <= 4
        assert combined["p"] >= alone["p"] and combined["detectable"] >= alone["detectable"]
    uncapped_welch = ((seed_var + (0.2 * np.sqrt(seed_var)) ** 2) ** 2
                      / (seed_var ** 2 / 4 + (0.2 * np.sqrt(seed_var)) ** 4 / 999))
    assert uncapped_welch > 4  # the planted case really is one where uncapped df would exceed the seeds'
