"""studies.trunks.trunk_stats: Holm's rule on a hand-worked case, the trunk-level t-test against scipy, the
variance components against a direct ANOVA, and the trunks a given effect would need (issue #46)."""
from __future__ import annotations

import numpy as np
import pytest
from scipy import stats

from studies.trunks.trunk_stats import components, holm, images_needed, trunk_test, trunks_needed


def test_holm_on_a_hand_worked_case():
    # sorted: .005 <= .05/4 yes; .01 <= .05/3 yes; .03 <= .05/2 no -> stop: .03 and .04 stand
    rejected, adjusted = holm([0.01, 0.04, 0.03, 0.005], alpha=0.05)
    assert rejected == [True, False, False, True]
    assert adjusted == pytest.approx([0.03, 0.06, 0.06, 0.02])  # 3 x .01, max(2 x .03, .04), 2 x .03, 4 x .005
    # Holm stops at the first failure: .011 would pass its own bar (.05/2) but follows a failure (.02 > .05/3)
    assert holm([0.001, 0.02, 0.011, 0.5], alpha=0.05)[0] == [True, True, True, False]
    assert holm([0.001, 0.02, 0.04, 0.5], alpha=0.05)[0] == [True, False, False, False]


def test_the_trunk_test_uses_one_number_per_trunk():
    per_trunk = [[0.05, 0.07], [0.01, 0.03], [0.09, 0.02]]
    test = trunk_test(per_trunk)
    means = [0.06, 0.02, 0.055]
    ref = stats.ttest_1samp(means, 0)
    assert test["df"] == 2 and test["p"] == pytest.approx(ref.pvalue) and test["mean"] == pytest.approx(np.mean(means))
    se = np.std(means, ddof=1) / np.sqrt(3)
    assert test["detectable"] == pytest.approx((stats.t.ppf(0.975, 2) + stats.t.ppf(0.8, 2)) * se)
    # six seeds pooled as if independent would claim 5 df and a smaller p: the design replicates 3 trunks
    assert stats.ttest_1samp(np.ravel(per_trunk), 0).pvalue < test["p"]


def test_variance_components_match_a_direct_anova():
    rng = np.random.default_rng(0)
    t, s = 6, 4
    data = 0.03 + rng.normal(0, 0.02, (t, 1)) + rng.normal(0, 0.01, (t, s))
    image_diffs = rng.normal(0.03, 0.3, 500)
    comps = components(data.tolist(), image_diffs=image_diffs)
    grand = data.mean()
    ss_between = s * ((data.mean(axis=1) - grand) ** 2).sum()
    ss_within = ((data - data.mean(axis=1, keepdims=True)) ** 2).sum()
    ms_b, ms_w = ss_between / (t - 1), ss_within / (t * (s - 1))
    assert ms_b > ms_w  # the planted trunk effect shows
    assert comps.seed == pytest.approx(ms_w) and comps.trunk == pytest.approx((ms_b - ms_w) / s)
    assert comps.n_images == 500 and comps.image == pytest.approx(((image_diffs - image_diffs.mean()) ** 2).sum() / 499)
    # in a balanced design the grand mean's squared standard error from the components is MS between / (t s)
    assert comps.se2(t, s, images=10**12) == pytest.approx(ms_b / (t * s))
    # a trunk component below zero by sampling is floored, not reported negative
    flat = components([[0.0, 1.0], [1.0, 0.0], [0.5, 0.5]])
    assert flat.trunk == 0.0 and flat.seed == pytest.approx(np.mean([0.5, 0.5, 0.0]))


def test_trunks_needed_is_the_first_count_whose_detectable_effect_fits():
    comps = components([[0.05, 0.07], [0.01, 0.03], [0.09, 0.02]])
    n = trunks_needed(0.02, comps, seeds=2)
    assert n is not None and n > 3

    def detectable(trunks):
        return (stats.t.ppf(0.975, trunks - 1) + stats.t.ppf(0.8, trunks - 1)) * np.sqrt(comps.se2(trunks, 2))

    assert detectable(n) <= 0.02 < detectable(n - 1)
    assert trunks_needed(0.5, comps, seeds=2) == 2 and trunks_needed(1e-9, comps, seeds=2, most=50) is None


def test_images_needed_is_the_first_count_whose_detectable_effect_fits_else_none():
    images = np.random.default_rng(0).normal(0.02, 0.3, 200)
    comps = components([[0.02, 0.03], [0.01, 0.02], [0.03, 0.02]], images)

    def detectable(n_images, trunks=10):
        return (stats.t.ppf(0.975, trunks - 1) + stats.t.ppf(0.8, trunks - 1)) * np.sqrt(comps.se2(trunks, 2, n_images))

    n = images_needed(0.02, comps, trunks=10, seeds=2)
    assert n is not None and detectable(n) <= 0.02 < detectable(n - 1)
    # trunks this far apart: their spread alone exceeds what a .02 effect leaves room for, whatever the test set
    comps = components([[0.0, 0.01], [0.04, 0.05], [0.08, 0.07]], images)
    assert detectable(10**9, trunks=3) > 0.02 and images_needed(0.02, comps, trunks=3, seeds=2) is None
    assert images_needed(0.02, components([[0.0, 0.1]] * 3), trunks=10, seeds=2) is None  # no image part known
