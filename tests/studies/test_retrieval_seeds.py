"""studies.stage_one_seeds.retrieval_seeds: mean and sample std of nDCG@K across seeds, against numpy by hand."""
import json

import numpy as np
import pytest

from capcore.errors import CapawareError
from studies.stage_one_seeds.retrieval_seeds import seed_table


def write(folder, rows):
    folder.mkdir()
    (folder / "retrieval.json").write_text(json.dumps({"rows": {n: {"ndcg": v} for n, v in rows.items()}}))
    return folder


def test_mean_and_std_per_row_and_k(tmp_path):
    a = write(tmp_path / "s0", {"LR": [0.5, 0.6], "TD": [0.4, 0.7]})
    b = write(tmp_path / "s1", {"LR": [0.7, 0.8], "TD": [0.2, 0.7], "extra": [1, 1]})
    table = seed_table([a, b], (1, 2, 5))
    lr = [ln for ln in table.splitlines() if ln.startswith("| LR")][0]
    assert lr == f"| LR | 0.600 ± {np.std([0.5, 0.7], ddof=1):.3f} | 0.700 ± {np.std([0.6, 0.8], ddof=1):.3f} |"
    assert "nDCG@5" not in table and "extra" not in table  # only K and rows that every seed has
    with pytest.raises(CapawareError, match="no retrieval table"):
        seed_table([a, tmp_path / "missing"], (1,))


def test_paired_differences_and_verdicts_against_numpy(tmp_path):
    from studies.stage_one_seeds.retrieval_seeds import claim_line, paired_table

    ref = "L(Log-ratio)+M(Dense)"
    seeds = [{ref: [0.6, 0.7], "TD": [0.5, 0.6], "TB": [0.7, 0.5], "Oracle": [1, 1]},
             {ref: [0.5, 0.8], "TD": [0.4, 0.7], "TB": [0.6, 0.9], "Oracle": [1, 1]},
             {ref: [0.7, 0.6], "TD": [0.6, 0.5], "TB": [0.8, 0.5], "Oracle": [1, 1]}]
    paths = [write(tmp_path / f"s{i}", rows) for i, rows in enumerate(seeds)]
    md, summary = paired_table(paths, (1, 2), ref, verdict_k=2)
    assert set(summary) == {"TD", "TB"}  # the Oracle bound is no competitor
    td = np.array([s[ref][1] - s["TD"][1] for s in seeds])
    assert summary["TD"]["per_seed"] == pytest.approx(td.tolist()) and summary["TD"]["verdict"] == "ahead"
    assert summary["TB"]["verdict"] == "not separated"  # +0.2, -0.1, +0.1: the sign changes
    row = [ln for ln in md.splitlines() if ln.startswith("| TD")][0]
    assert f"{td.mean():+.3f} ± {td.std(ddof=1):.3f}" in row and "3/3" in row
    assert "does not hold" in claim_line(ref, summary) and "not separated from TB" in claim_line(ref, summary)
    assert "holds here" in claim_line(ref, summary, matches=True)  # behind no row: "matches or beats"
    _, behind = paired_table(paths, (1,), ref, against=["TB"], verdict_k=1)
    assert behind["TB"]["verdict"] == "behind" and "behind TB" in claim_line(ref, behind, k=1, matches=True)
    with pytest.raises(CapawareError, match="not in every run"):
        paired_table(paths, (1,), ref, against=["nobody"])
