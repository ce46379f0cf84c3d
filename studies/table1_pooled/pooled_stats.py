"""The tests of Table 1's pooled study (issue #56, studies/table1_pooled/configs/declaration_table1_pooled.yaml).

- ``pooled_values``: the primary contrast's one number per trunk, Cap − Img averaged over the four cells (two
  models, XE and RL) and over the trunk's captioner seeds.
- ``trunk_t``: the two-sided one-sample t-test of those numbers on trunks − 1 degrees of freedom, with its
  interval (studies.trunks.trunk_stats.trunk_test computes the same test; this one adds the interval's ends).
- ``sign_flip_p``: the exact two-sided sign-flip (randomization) test of the same numbers, beside the t-test's p:
  it assumes only that each trunk's value is symmetric about zero under the null (the t-test assumes them normal),
  and is exact over the 2^n sign patterns, so with n trunks it cannot go below 2 / 2^n (.0625 for five).
- ``tost``: the equivalence test at ±margin, two one-sided t-tests on the same numbers; it passes when both
  reject at alpha, which is the same as the 1 − 2·alpha interval lying inside ±margin.
- ``verdict``: the only words the study may print about its question.

Hand-written because each is a few lines over scipy's t distribution (scipy has no TOST; statsmodels, which
has one, is not a dependency); tests/studies/test_pooled_stats.py checks each on hand-worked cases and against
scipy.stats.ttest_1samp (the sign-flip p against scipy.stats.permutation_test and a hand enumeration).
"""
from __future__ import annotations

import numpy as np
from scipy.stats import t as student_t


def pooled_values(cells: list) -> np.ndarray:
    """[trunks] from ``cells``: one [trunks, seeds] array of paired differences per cell, same shape each."""
    stacked = np.asarray(cells, dtype=np.float64)  # [cells, trunks, seeds]
    if stacked.ndim != 3:
        raise ValueError(f"need cells x trunks x seeds differences, got shape {stacked.shape}")
    return stacked.mean(axis=(0, 2))


def trunk_t(values, alpha: float = 0.05) -> dict:
    """Mean, standard error, df, two-sided p and the (1 − alpha) interval of the trunk values' mean."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if n < 2:
        raise ValueError("the trunk-level test needs at least two trunks")
    mean, se, df = float(v.mean()), float(v.std(ddof=1) / np.sqrt(n)), n - 1
    half = float(student_t.ppf(1 - alpha / 2, df) * se)
    p = float(2 * student_t.sf(abs(mean) / se, df)) if se > 0 else (0.0 if mean else 1.0)
    return {"n_trunks": n, "mean": mean, "se": se, "df": df, "p": p, "low": mean - half, "high": mean + half,
            "values": v.tolist()}


def sign_flip_p(values) -> float:
    """Two-sided p of the exact sign-flip test: the share of the 2^n sign patterns of ``values`` (the observed one
    and its mirror among them) whose mean is at least as far from zero as the observed mean. Under the null each
    value is as likely negated as not (symmetric about zero; no normality), so the p is exact, and never below
    2 / 2^n. Ties within a relative 1e-12 count as "at least as far" (float sums of reordered signs differ in the
    last bits)."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    if not 1 <= n <= 20:
        raise ValueError(f"the exact sign-flip test enumerates 2^n patterns: n = {n} is outside 1..20")
    signs = 1 - 2 * ((np.arange(2 ** n)[:, None] >> np.arange(n)) & 1)  # [2^n, n] of +-1, row 0 all +1
    means = np.abs(signs @ v) / n
    observed = abs(float(v.mean()))
    return float(np.mean(means >= observed * (1 - 1e-12)))


def tost(values, margin: float, alpha: float = 0.05) -> dict:
    """Two one-sided tests of |true mean| < ``margin``: p_lower for H0 mean <= −margin, p_upper for H0 mean >=
    +margin; equivalent when max(p) < alpha. Also the 1 − 2·alpha interval, whose lying inside ±margin is the
    same decision."""
    v = np.asarray(values, dtype=np.float64)
    n = len(v)
    mean, se, df = float(v.mean()), float(v.std(ddof=1) / np.sqrt(n)), n - 1
    with np.errstate(divide="ignore"):  # identical trunk values (se 0): each one-sided test is then certain
        p_lower = float(student_t.sf(np.float64(mean + margin) / se, df))
        p_upper = float(student_t.cdf(np.float64(mean - margin) / se, df))
    half = float(student_t.ppf(1 - alpha, df) * se)
    return {"margin": margin, "p_lower": p_lower, "p_upper": p_upper, "p": max(p_lower, p_upper),
            "equivalent": max(p_lower, p_upper) < alpha, "low": mean - half, "high": mean + half,
            "level": 1 - 2 * alpha}


def verdict(test: dict, equivalence: dict, alpha: float = 0.05) -> str:
    """A difference (p < alpha), equivalence within ±margin (the TOST passes), or inconclusive with the
    interval; both at once means a difference smaller than the margin, and is said so."""
    interval = f"[{test['low']:+.3f}, {test['high']:+.3f}]"
    margin = f"±{equivalence['margin']:.2f}"
    if test["p"] < alpha:
        sign = "higher" if test["mean"] > 0 else "lower"
        tail = f", and within {margin} (TOST p {equivalence['p']:.3g})" if equivalence["equivalent"] else ""
        return f"a difference: {test['mean']:+.3f} {interval}, p {test['p']:.3g}: {sign}{tail}"
    if equivalence["equivalent"]:
        return f"equivalent within {margin}: {test['mean']:+.3f}, {equivalence['level']:.0%} interval " \
               f"[{equivalence['low']:+.3f}, {equivalence['high']:+.3f}], TOST p {equivalence['p']:.3g}"
    return f"inconclusive: {test['mean']:+.3f} {interval}, p {test['p']:.3g}; not within {margin} " \
           f"(TOST p {equivalence['p']:.3g})"
