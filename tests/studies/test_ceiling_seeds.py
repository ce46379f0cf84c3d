"""studies/caption_labels/ceiling_seeds.py: the label-ceiling shares over seeds, against a direct computation."""
import json

import numpy as np
import pytest

from studies.caption_labels.ceiling_seeds import load, table

from capcore.errors import CapawareError


def write(tmp_path, seed, shares):
    p = tmp_path / f"s{seed}.json"
    p.write_text(json.dumps({"ceiling": "shape + colour", "ceiling_ndcg": 0.85, "seed": seed,
                             "rows": {"Img": {"ndcg": 0.77, "ceiling_share": 0.0},
                                      "Cap": {"ndcg": 0.77 + 0.08 * shares, "ceiling_share": shares}}}))
    return str(p)


def test_mean_spread_and_count_of_seeds_past_half_the_gap(tmp_path):
    shares = [0.4, 0.6, 0.7]
    out = table(load([write(tmp_path, s, v) for s, v in enumerate(shares)]))
    cap = next(line for line in out.splitlines() if line.startswith("| Cap |"))
    assert f"{np.mean(shares):+.0%} ± {np.std(shares, ddof=1):.0%}" in cap
    assert "0: +40%, 1: +60%, 2: +70%" in cap and cap.endswith("| 2 of 3 |")
    assert f"{np.mean([0.77 + 0.08 * v for v in shares]):.3f}" in cap


def test_a_missing_seed_file_is_one_line(tmp_path):
    with pytest.raises(CapawareError, match="not found"):
        load([str(tmp_path / "none.json")])
