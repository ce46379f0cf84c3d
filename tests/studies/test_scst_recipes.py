"""eval.reporting.scst_gains (the four checks of an XE -> SCST pair) and studies.scst_recipes.scst_recipes (recipes
over seeds,
chosen on val) on hand-made run folders; studies/scst_recipes/run_scst_recipes.py's recipe grid."""
import json

import numpy as np
import pytest

from capcore.errors import CapawareError
from eval.reporting import scst_gains
from studies.scst_recipes import scst_recipes
from studies.scst_recipes.run_scst_recipes import parse, recipes


def write_run(path, C, B4, distinct, bad, length=6.0, history=None, signature=None):
    path.mkdir(parents=True, exist_ok=True)
    (path / "metrics_test.json").write_text(json.dumps({
        "metrics": {"CIDEr-D": C, "BLEU-4": B4}, "scst_signature": signature,
        "discriminativeness": {"distinct_captions": distinct, "bad_endings": bad, "mean_length": length}}))
    if history is not None:
        (path / "history.json").write_text(json.dumps(history))
    return path


def hist(xe_val, best_val, bad_xe=0.0, bad=0.0, distinct_xe=0.7, distinct=0.7, b4_xe=0.3, b4=0.3):
    return [{"epoch": 0, "cider_d": xe_val, "bad_endings": bad_xe, "distinct_captions": distinct_xe, "bleu4": b4_xe},
            {"epoch": 1, "cider_d": best_val - 0.01, "bad_endings": bad, "distinct_captions": distinct, "bleu4": b4},
            {"epoch": 2, "cider_d": best_val, "bad_endings": bad, "distinct_captions": distinct, "bleu4": b4}]


def test_each_check_fails_on_its_own_boundary(tmp_path):
    xe = write_run(tmp_path / "xe", C=0.80, B4=0.30, distinct=0.70, bad=0.02)
    cases = {  # SCST numbers -> the one check that fails
        "ok": ((0.85, 0.270, 0.56, 0.04), None),
        "c": ((0.79, 0.30, 0.70, 0.02), "C up"),
        "b4": ((0.85, 0.2699, 0.70, 0.02), "B4 >= 90%"),
        "d": ((0.85, 0.30, 0.55, 0.02), "distinct >= 80%"),
        "bad": ((0.85, 0.30, 0.70, 0.0401), "bad <= +2 pt"),
    }
    for name, ((C, B4, distinct, bad), failing) in cases.items():
        scst = write_run(tmp_path / f"{name}_scst", C, B4, distinct, bad, history=hist(0.9, 0.95))
        row = scst_gains.pair(xe, scst)
        assert [k for k, v in row["checks"].items() if not v] == ([failing] if failing else []), name
        assert row["val_C"] == 0.95 and row["val_C_xe"] == 0.9 and row["best_epoch"] == 2
    bar = {0.2699: (False, True), 0.2551: (False, True), 0.2549: (False, False)}  # 90%, 85.03%, 84.97% of XE's
    for B4, (usual, health) in bar.items():  # the demo's health bar asks 85%, the column the usual 90%
        row = scst_gains.pair(xe, write_run(tmp_path / f"h{B4}_scst", 0.85, B4, 0.7, 0.02, history=hist(0.9, 0.95)))
        assert (row["checks"]["B4 >= 90%"], row["health_bar"]) == (usual, health), B4
    guarded = hist(0.9, 0.95)
    guarded[2]["eligible"] = False  # the collapse guard kept epoch 2 out of best.pt
    row = scst_gains.pair(xe, write_run(tmp_path / "g_scst", 0.85, 0.3, 0.7, 0.0, history=guarded))
    assert (row["best_epoch"], row["val_C"]) == (1, 0.94)


def test_gains_cli_pairs_xe_runs_with_their_scst_runs(tmp_path, capsys):
    sig = "Standard_wInit+Cider-D[n4,s6]+average[nspi5]+df[train@0123abcd]+xe[1]+t[0.5]"
    write_run(tmp_path / "img_att2all2", 0.8, 0.3, 0.7, 0.0)
    write_run(tmp_path / "img_att2all2_scst", 0.9, 0.31, 0.7, 0.0, history=hist(0.8, 0.9), signature=sig)
    write_run(tmp_path / "cap_topdown", 0.8, 0.3, 0.7, 0.0)  # no SCST run: not a pair
    scst_gains.main([str(tmp_path), "--out", str(tmp_path / "gains.md")])
    text = capsys.readouterr().out
    assert "img_att2all2_scst | 0.800 → 0.900" in text and "cap_topdown" not in text
    assert "All four checks hold for 1 of 1" in text and sig in text and "0.300 → 0.310 (103.3%)" in text
    write_run(tmp_path / "cap_att2all2", 0.1, 0.0, 0.7, 0.0)  # a tiny run: XE's BLEU-4 is 0, no ratio to give
    write_run(tmp_path / "cap_att2all2_scst", 0.2, 0.0, 0.7, 0.0, history=hist(0.1, 0.2), signature=sig)
    scst_gains.main([str(tmp_path)])
    assert "| 0.000 → 0.000 (XE 0) |" in capsys.readouterr().out
    assert "BLEU-4 at least 85% of XE's, one seed; distinct and bad endings as above) holds for 1 of 1" in text
    assert json.loads((tmp_path / "gains.json").read_text())["rows"][0]["checks"]["C up"] is True
    with pytest.raises(CapawareError, match="no XE run with its SCST run"):
        scst_gains.pairs_in(tmp_path / "img_att2all2")
    old = write_run(tmp_path / "old", 0.8, 0.3, 0.7, None)
    with pytest.raises(CapawareError, match="bad_endings"):
        scst_gains.test_numbers(old)


def fake_recipes(tmp_path, gains: dict[str, list[float]], bad: dict[str, float], distinct: dict | None = None,
                 b4_gain: dict | None = None):
    """Two captioners x len(seeds) seeds per recipe; val gain per seed as given; test C = XE + val gain."""
    jobs = []
    for recipe, per_seed in gains.items():
        for seed, g in enumerate(per_seed):
            for run in ("img_att2all2", "cap_topdown"):
                xe = write_run(tmp_path / f"s{seed}" / run, 0.8, 0.3, 0.7, 0.0)
                scst = write_run(tmp_path / recipe / f"s{seed}" / f"{run}_scst", 0.8 + g, 0.3 + g / 10, 0.7,
                                 bad[recipe], signature=recipe,
                                 history=hist(0.9, 0.9 + g, 0.0, bad[recipe], 0.7, (distinct or {}).get(recipe, 0.7),
                                              0.3, 0.3 + (b4_gain or {}).get(recipe, -0.01)))
                jobs.append({"recipe": recipe, "seed": seed, "run": run, "xe_run": str(xe), "scst_run": str(scst)})
    path = tmp_path / "jobs.json"
    path.write_text(json.dumps({"jobs": jobs}))
    return path


def test_recipes_over_seeds_choose_on_val_and_pair_the_eos_variants(tmp_path, capsys):
    gains = {"mean-eos-xe": [0.05, 0.07, 0.06], "mean-noeos-xe": [0.04, 0.05, 0.03],  # up in every run
             "greedy-eos-plain": [0.20, 0.25, 0.22],  # the largest gain, but it learned to truncate
             "greedy-eos-xe": [0.10, 0.11, 0.12],  # the next, but it collapsed onto few captions
             "mean-eos-plain": [0.10, 0.0, 0.10]}  # more on average, but one seed did not move off its XE start
    bad = {"mean-eos-xe": 0.01, "mean-noeos-xe": 0.0, "greedy-eos-plain": 0.10, "greedy-eos-xe": 0.0,
           "mean-eos-plain": 0.0}
    jobs = fake_recipes(tmp_path, gains, bad, distinct={"greedy-eos-xe": 0.55})
    scst_recipes.main([str(jobs), "--out", str(tmp_path / "out"), "--machine", "test box"])
    result = json.loads((tmp_path / "out" / "scst_recipes.json").read_text())
    assert result["chosen"] == "mean-eos-xe"
    assert "excluded: greedy-eos-plain, greedy-eos-xe" in result["why"] and "rose in 6 of its 6 runs" in result["why"]
    s = result["recipes"]["mean-eos-xe"]
    assert s["val_dC"]["mean"] == pytest.approx(0.06)
    assert s["val_dC"]["sd"] == pytest.approx(np.std([.05, .07, .06], ddof=1))
    assert (s["C_up"], s["val_C_up"], s["n_runs"], s["all_checks"]) == (6, 6, 6, 6)
    assert result["recipes"]["mean-eos-plain"]["val_C_up"] == 4
    pair = next(p for p in result["eos_pairs"] if p["pair"] == "mean-eos-xe − mean-noeos-xe")
    np.testing.assert_allclose(pair["val_dC"]["values"], [0.01, 0.02, 0.03], atol=1e-12)
    assert pair["dbad"]["mean"] == pytest.approx(0.01)
    md = (tmp_path / "out" / "scst_recipes.md").read_text()
    assert "| **mean-eos-xe** |" in md and "test box" in md


def test_ties_on_cider_go_to_the_recipe_whose_val_bleu4_rises(tmp_path):
    gains = {"mean-eos-xe3": [0.10, 0.12, 0.11], "mean-eos-xe3-b0.5": [0.08, 0.09, 0.10]}  # both up everywhere
    jobs = fake_recipes(tmp_path, gains, {k: 0.0 for k in gains}, b4_gain={"mean-eos-xe3-b0.5": 0.01})
    scst_recipes.main([str(jobs), "--out", str(tmp_path / "out")])
    result = json.loads((tmp_path / "out" / "scst_recipes.json").read_text())
    assert result["chosen"] == "mean-eos-xe3-b0.5"  # a smaller CIDEr-D gain, but BLEU-4 up in 6 of 6 on val
    assert (result["recipes"]["mean-eos-xe3"]["val_B4_up"],
            result["recipes"]["mean-eos-xe3-b0.5"]["val_B4_up"]) == (0, 6)
    assert "val BLEU-4 in 6" in result["why"]


def test_no_recipe_is_chosen_when_all_truncate(tmp_path):
    jobs = fake_recipes(tmp_path, {"greedy-eos-plain": [0.2, 0.2]}, {"greedy-eos-plain": 0.1})
    with pytest.raises(CapawareError, match="bad endings"):
        scst_recipes.main([str(jobs), "--out", str(tmp_path / "out")])


def test_recipe_grid_changes_one_setting_between_neighbours():
    grid = recipes([1.0])
    assert len(grid) == 8 and len({tuple(v) for v in grid.values()}) == 8
    wider = recipes([1.0, 3.0])
    assert len(wider) == 12 and "train.xe_weight=3.0" in wider["mean-eos-xe3"]
    assert grid["mean-eos-xe"] == ["train.baseline=mean", "reward.eos=true", "train.xe_weight=1.0",
                                   "reward.bleu4_weight=0.0"]
    assert grid["greedy-noeos-plain"] == ["train.baseline=greedy", "reward.eos=false", "train.xe_weight=0.0",
                                          "reward.bleu4_weight=0.0"]
    with_bleu = recipes([3.0], [0.0, 0.5])
    assert len(with_bleu) == 16 and with_bleu["mean-eos-xe3-b0.5"] == [*with_bleu["mean-eos-xe3"][:-1],
                                                                       "reward.bleu4_weight=0.5"]
    for name, over in grid.items():
        assert set(grid[name]) <= set(wider[name])
        flipped = name.replace("-eos-", "-noeos-") if "-eos-" in name else name.replace("-noeos-", "-eos-")
        assert sum(a != b for a, b in zip(over, grid[flipped])) == 1
    assert parse("python -m capaware.stage scst configs/demo/demo_topdown_scst.yaml run_dir=r data.features=cap") == \
        ("configs/demo/demo_topdown_scst.yaml", "cap", "topdown")
