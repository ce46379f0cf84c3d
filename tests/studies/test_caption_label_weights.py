"""studies/caption_labels/caption_label_weights.py: per-group scene differences and the variance shares they explain."""

import numpy as np
import pytest

from studies.caption_labels.caption_label_weights import differences, jaccard, r2


def test_differences_are_jaccard_for_sets_and_inequality_for_one_value_groups():
    tags = [["colour:red", "colour:blue", "shape:circle", "count:2", "background:white"],
            ["colour:red", "shape:circle", "shape:star", "count:2", "background:black"]]
    d = differences(tags, np.array([0, 0]), np.array([1, 0]))
    assert d["colour"].tolist() == [pytest.approx(0.5), 0.0]  # {red, blue} vs {red}: 1 - 1/2
    assert d["shape"].tolist() == [pytest.approx(0.5), 0.0]
    assert d["count"].tolist() == [0.0, 0.0] and d["background"].tolist() == [1.0, 0.0]
    assert d["size"].tolist() == [0.0, 0.0]  # neither names a size: no difference
    assert jaccard(set(), set()) == 0.0


def test_r2_is_the_explained_share_of_an_exact_linear_target():
    rng = np.random.default_rng(0)
    x = rng.normal(size=(200, 3))
    assert r2(x, 2 * x[:, 0] - x[:, 2] + 5) == pytest.approx(1.0)
    noisy = x[:, 0] + rng.normal(size=200)
    assert r2(x[:, :1], noisy) == pytest.approx(np.corrcoef(x[:, 0], noisy)[0, 1] ** 2)
