"""eval.retrieval_seeds: mean and sample std of nDCG@K across seeds, against numpy by hand."""
import json

import numpy as np
import pytest

from embedder.errors import CapawareError
from eval.retrieval_seeds import seed_table


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
