"""studies/self_retrieval (issue #66's declared study): the arms table, the world's sizes, the declaration's checks
and stamp, one run's record from the files the stage writes, and the table's tests recomputed from per-image values
against independent computations (scipy's one-sample t, a hand TOST), with words only from the primary pair."""
import json
import shutil
from pathlib import Path

import numpy as np
import pytest
import yaml
from scipy.stats import ttest_1samp

from capcore.errors import CapawareError
from studies.self_retrieval import arms, declaration, run_study, study_table, world

ROOT = Path(__file__).resolve().parents[2]
CORES = ["att2all2", "topdown"]


def write_declaration(tmp_path, **design) -> Path:
    """A copy of the real declaration with a design of its own, its arm files copied under tmp_path."""
    cfg = yaml.safe_load((ROOT / "studies/self_retrieval/configs/declaration_self_retrieval.yaml").read_text())
    cfg["design"].update({"seeds": [100, 101, 102], "secondary_seeds": [100, 101], **design})
    for name in cfg["arm_files"]:
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy(ROOT / name, tmp_path / name)
    path = tmp_path / "decl.yaml"
    path.write_text(yaml.safe_dump(cfg, sort_keys=False))
    return path


def test_the_arms_differ_from_the_baseline_by_the_retrieval_section_alone(tmp_path):
    for arm in arms.ARMS:
        assert all(o.startswith("retrieval.") for o in arms.overrides(arm, tmp_path)), arm
    assert arms.overrides("sr_pl", tmp_path)[-1] == "retrieval.window=[10,100]"
    assert "retrieval.window=[0,0]" in arms.overrides("sr_pl_uniform", tmp_path)
    with pytest.raises(KeyError, match="unknown arm 'sr_x'"):
        arms.overrides("sr_x", tmp_path)


def test_the_world_writes_its_declared_sizes(tmp_path):
    cmd, out = world.data_job(tmp_path)
    assert out == tmp_path / "data" / "captions"
    assert all(f"--{k.replace('_', '-')} {v}" in cmd for k, v in arms.WORLD.items())
    (_, img), (_, pool) = world.features_jobs(tmp_path)
    assert (img.name, pool.name) == ("img", "unlabeled_img")


def test_the_declaration_checks_and_its_stamp_moves_with_any_arm_file(tmp_path, monkeypatch):
    monkeypatch.setattr(declaration, "ROOT", tmp_path)  # arm files are looked up under the copy
    path = write_declaration(tmp_path)
    decl = declaration.load_declaration(path)
    assert decl.arms_of(100) == ["baseline", "sr_fl", "sr_pl", "sr_a4", "sr_vse0", "sr_pl_uniform"]
    assert decl.arms_of(102) == ["baseline", "sr_fl"]
    before = declaration.stamp(decl, path, tmp_path)["stamp_sha256"]
    with open(tmp_path / "rl/rewards.py", "a") as f:
        f.write("# an edit after the declaration\n")
    assert declaration.stamp(decl, path, tmp_path)["stamp_sha256"] != before
    with pytest.raises(CapawareError, match="design.secondary_seeds"):
        declaration.load_declaration(write_declaration(tmp_path, secondary_seeds=[7]))
    with pytest.raises(CapawareError, match="design.seeds"):
        declaration.load_declaration(write_declaration(tmp_path, seeds=[1, 1, 2]))


def fake_run(out: Path, ranks: list[int], cider: list[float], shuffle_ids: bool = False) -> None:
    out.mkdir(parents=True)
    ids = [500 + i for i in range(len(ranks))]
    metrics = {"metrics": {"BLEU-4": 0.4, "CIDEr-D": float(np.mean(cider))}, "scst_signature": "sig",
               "discriminativeness": {"unique_captions": 0.5, "novel_captions": 0.25, "distinct_captions": 0.6,
                                      "bad_endings": 0.0}}
    (out / "metrics_test.json").write_text(json.dumps(metrics))
    (out / "per_image_test.json").write_text(json.dumps([{"image_id": i, "CIDEr-D": c} for i, c in zip(ids, cider)]))
    sr_ids = [i + 1 for i in ids] if shuffle_ids else ids
    sr = {"r1": 0.0, "r5": 0.0, "r10": 0.0, "per_image": [{"image_id": i, "rank": r} for i, r in zip(sr_ids, ranks)]}
    (out / "self_retrieval_test.json").write_text(json.dumps(sr))


def test_a_run_record_keeps_per_image_values_and_refuses_mismatched_images(tmp_path):
    fake_run(tmp_path / "a", [0, 3, 12, 0], [1.0, 0.5, 0.25, 0.75])
    rec = run_study.run_record(tmp_path / "a")
    assert rec["rank_per_image"] == [0, 3, 12, 0] and rec["unique"] == 0.5 and rec["novel"] == 0.25
    values = study_table.run_values(rec)
    assert (values["r1"], values["r5"], values["r10"], values["cider_d"]) == (50.0, 75.0, 75.0, 0.625)
    fake_run(tmp_path / "b", [0, 1], [1.0, 0.5], shuffle_ids=True)
    with pytest.raises(CapawareError, match="different images"):
        run_study.run_record(tmp_path / "b")


def synthetic_records(decl, stamp: dict, rng) -> tuple[list[dict], np.ndarray, np.ndarray]:
    """Seed records whose per-image values are drawn at random; returns them and the per-seed contrasts computed
    here independently (R@1 as the share of rank 0, CIDEr-D as the mean)."""
    records, r1_diffs, cider_diffs = [], [], []
    for seed in decl.design.seeds:
        runs, per = {}, {}
        for arm in decl.arms_of(seed):
            runs[arm] = {}
            for core in CORES:
                p = 0.3 if arm == "sr_fl" else 0.2
                ranks = np.where(rng.random(200) < p, 0, rng.integers(1, 50, 200)).tolist()
                cider = rng.normal(0.8, 0.3, 200).round(6).tolist()
                runs[arm][core] = {"rank_per_image": ranks, "cider_d_per_image": cider, "metrics": {"BLEU-4": 0.4},
                                   "unique": 0.5, "novel": 0.3}
                per[arm, core] = (100 * np.mean(np.array(ranks) == 0), np.mean(cider))
        r1_diffs.append(np.mean([per["sr_fl", c][0] - per["baseline", c][0] for c in CORES]))
        cider_diffs.append(np.mean([per["sr_fl", c][1] - per["baseline", c][1] for c in CORES]))
        records.append({"seed": seed, "machine": "cpu", "runs": runs, "declared": stamp})
    return records, np.array(r1_diffs), np.array(cider_diffs)


def test_the_table_tests_the_primary_pair_from_per_image_values(tmp_path, monkeypatch):
    monkeypatch.setattr(declaration, "ROOT", tmp_path)
    path = write_declaration(tmp_path, seeds=[100, 101, 102, 103, 104], secondary_seeds=[100, 101])
    decl = declaration.load_declaration(path)
    records, r1, cider = synthetic_records(decl, declaration.stamp(decl, path, tmp_path), np.random.default_rng(0))
    result = study_table.tests(records, decl)
    assert result["primary"]["mean"] == pytest.approx(r1.mean())
    assert result["primary"]["p"] == pytest.approx(ttest_1samp(r1, 0).pvalue)
    assert result["co_primary"]["p"] == pytest.approx(ttest_1samp(cider, 0).pvalue)
    se = cider.std(ddof=1) / np.sqrt(len(cider))
    assert result["tost"]["p_lower"] == pytest.approx(ttest_1samp(cider, -0.02, alternative="greater").pvalue)
    assert result["tost"]["high"] == pytest.approx(cider.mean() + 2.131846786 * se, rel=1e-6)  # t(.95, 4)
    assert set(result["secondary_r1"]) == {"sr_pl − sr_fl", "sr_a4 − sr_fl", "sr_vse0 − sr_fl",
                                           "sr_pl − sr_pl_uniform"}
    assert len(result["secondary_r1"]["sr_a4 − sr_fl"]["values"]) == 2  # the secondary seeds only
    text = study_table.markdown(records, decl, result)
    assert "| SR-FL (α = 1) | topdown | 5 |" in text and "| SR-FL, α = 4 | 2 |" in text


def test_records_of_another_stamp_are_refused_and_an_interim_table_has_no_words(tmp_path, monkeypatch):
    monkeypatch.setattr(declaration, "ROOT", tmp_path)
    path = write_declaration(tmp_path)
    decl = declaration.load_declaration(path)
    stamp = declaration.stamp(decl, path, tmp_path)
    records, _, _ = synthetic_records(decl, stamp, np.random.default_rng(1))
    folder = tmp_path / "records"
    folder.mkdir()
    for r in records[:2]:
        (folder / f"seed_{r['seed']}.json").write_text(json.dumps(r))
    monkeypatch.setattr(study_table, "DEFAULT", path)
    study_table.main(["--declaration", str(path), "--records", str(folder)])
    text = (folder / "study_table.md").read_text()
    assert "INTERIM" in text and "withheld" in text and "finds its own image" not in text
    bad = dict(records[2], declared=dict(stamp, stamp_sha256="0" * 64))
    (folder / "seed_102.json").write_text(json.dumps(bad))
    with pytest.raises(CapawareError, match="not made under this declaration: stamp_sha256"):
        study_table.main(["--declaration", str(path), "--records", str(folder)])


def test_the_declaration_as_committed_loads_and_its_arm_files_are_unchanged():
    """Any edit to the declaration or an arm file after it was committed breaks this test: the study's records carry
    the stamp, and a changed arm file means a new declaration and a new run, never an edit."""
    decl = declaration.load_declaration()
    assert len(decl.design.seeds) == 12 and not set(decl.design.seeds) & {0, 1, 2}  # none of the pilot's seeds
    kept = (ROOT / "studies/self_retrieval/declared_stamp.txt").read_text().strip()
    assert declaration.stamp(decl)["stamp_sha256"] == kept
