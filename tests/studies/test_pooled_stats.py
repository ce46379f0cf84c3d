"""studies/table1_pooled/pooled_stats.py on hand-worked cases (issue #56)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy.stats import ttest_1samp

from studies.table1_pooled.pooled_stats import pooled_values, sign_flip_p, tost, trunk_t, verdict


def test_the_pooled_value_of_a_trunk_is_its_four_cells_and_seeds_averaged():
    # trunk 0: cells (.04, .02), (.00, .02), (.06, .06), (.01, .03) -> (.06 + .02 + .12 + .04) / 8 = .03
    # trunk 1: every difference -.01 -> -.01
    cells = [[[.04, .02], [-.01, -.01]], [[.00, .02], [-.01, -.01]], [[.06, .06], [-.01, -.01]],
             [[.01, .03], [-.01, -.01]]]
    assert pooled_values(cells) == pytest.approx([.03, -.01])
    with pytest.raises(ValueError):
        pooled_values([[.01, .02]])


def test_the_trunk_test_on_a_hand_worked_case_and_against_scipy():
    # values .01 .03 .02 .04: mean .025, sd sqrt(.0005 / 3) = .012910, se .0064550, t = 3.8730 on 3 df
    test = trunk_t([.01, .03, .02, .04])
    assert test["mean"] == pytest.approx(.025) and test["se"] == pytest.approx(.0064550, rel=1e-4)
    assert test["df"] == 3 and test["p"] == pytest.approx(ttest_1samp([.01, .03, .02, .04], 0).pvalue)
    assert test["p"] == pytest.approx(0.03047, abs=2e-5)  # 2 * (1 - F_t3(3.873)), from a t table: .0305
    assert test["low"] == pytest.approx(.025 - 3.1824 * .0064550, rel=1e-4)  # t(.975, 3) = 3.1824


def test_tost_on_a_hand_worked_case_and_its_interval_duality():
    # values .005 -.005 .000 .010 -.010: mean 0, sd .0079057, se .0035355 on 4 df;
    # margin .02: t = ±.02 / .0035355 = ±5.657, one-sided p = .00240 each side -> equivalent at .05
    values = [.005, -.005, .0, .010, -.010]
    out = tost(values, 0.02)
    assert out["p_lower"] == pytest.approx(.00240, abs=2e-5) and out["p_upper"] == pytest.approx(out["p_lower"])
    assert out["equivalent"] and -0.02 < out["low"] < out["high"] < 0.02
    wide = tost([.03, -.03, .0, .02, -.02], 0.02)  # se .0106: the 90% interval is [-.023, +.023]
    assert not wide["equivalent"] and wide["low"] < -0.02
    rng = np.random.default_rng(0)
    for _ in range(200):  # passes exactly when the 1 - 2 alpha interval lies inside the margins
        v = rng.normal(rng.uniform(-.03, .03), rng.uniform(.002, .03), size=rng.integers(3, 9))
        t = tost(v, 0.02)
        assert t["equivalent"] == (-0.02 < t["low"] and t["high"] < 0.02)


def test_the_verdict_words_follow_the_tests_only():
    clear = trunk_t([.03, .035, .028, .04, .031])
    assert verdict(clear, tost([.03, .035, .028, .04, .031], .02)).startswith("a difference: +0.033")
    flat = [.005, -.005, .0, .010, -.010]
    assert verdict(trunk_t(flat), tost(flat, .02)).startswith("equivalent within ±0.02")
    noisy = [.05, -.04, .03, -.02]
    assert verdict(trunk_t(noisy), tost(noisy, .02)).startswith("inconclusive: +0.005")


def test_the_sign_flip_p_by_hand_against_scipy_and_its_floor():
    """Issue #65: the exact sign-flip p beside the t-test's. By hand: values 1, 2, 3 (mean 2): of the 8 sign
    patterns only +++ (6) and --- (-6) reach |sum| 6; -++ etc. give 4, 2, 0 -> p 2/8. Values 1, 2, -3: |sum| 0 is
    reached by every pattern -> p 1."""
    from scipy.stats import permutation_test

    assert sign_flip_p([1.0, 2.0, 3.0]) == 2 / 8
    assert sign_flip_p([1.0, 2.0, -3.0]) == 1.0
    assert sign_flip_p([1.0, 1.0, 1.0, 5.0]) == pytest.approx(2 / 16)  # 8 and -8 only; 1+1+1-5 = -2, ...
    assert sign_flip_p([2.0, 1.0, 1.0, 0.0]) == pytest.approx(4 / 16)  # the 0 doubles each: +++±, ---±
    # .3 -.1 -.2 .7 (sum .7): flipping a set S gives .7 - 2 sum(S), as far as .7 where sum(S) <= 0 or >= .7: {},
    # {-.1}, {-.2}, {.7}, {.3 .7}, {-.1 -.2}, {.3 -.1 -.2} (0 only up to float rounding), {.3 -.1 .7},
    # {.3 -.2 .7}, all four -> 10 of 16
    assert sign_flip_p([0.3, -0.1, -0.2, 0.7]) == pytest.approx(10 / 16)
    # the study's five Cap − Img trunk values (docs/study_results/table1_pooled/table1_pooled.json, rounded): every
    # value positive, so only the all-plus and all-minus patterns reach the observed mean: the floor, 2/32
    study = [0.022, 0.039, 0.006, 0.048, 0.048]
    assert sign_flip_p(study) == 2 / 2 ** 5 == 0.0625
    rng = np.random.default_rng(3)
    for n in (2, 3, 5, 7, 9):
        v = rng.normal(rng.uniform(-0.02, 0.03), 0.02, n)
        want = permutation_test((v,), lambda x, axis: np.mean(x, axis=axis), permutation_type="samples",
                                n_resamples=np.inf, alternative="two-sided").pvalue
        assert sign_flip_p(v) == pytest.approx(want), (n, v)
        assert sign_flip_p(v) >= 2 / 2 ** n  # never below its floor
        assert sign_flip_p(np.abs(v) + 1e-3) == pytest.approx(2 / 2 ** n)  # all one sign: the floor itself
    with pytest.raises(ValueError):
        sign_flip_p([])
