"""The statistics of a study replicated over stage-one trunks (issue #46,
studies/trunks/configs/declaration_table1.yaml).

A primary cell's data: for each trunk, the paired difference (Cap − Img, say) of each captioner seed, and
optionally the per-image differences behind them. The trunk is the unit of replication, so the test uses one
number per trunk (its seeds' mean) and trunks − 1 degrees of freedom; Holm's rule runs over the primary cells;
the variance components say where the error comes from and what a given effect would need.

Hand-written because each piece is a few lines over scipy's t distribution, and the project's stack has no
library for a balanced nested design's method-of-moments components and the power question together
(statsmodels, whose mixed models could fit them, is not a dependency). The moments are the textbook
balanced-design estimates, each checked against an independent computation in tests/studies/test_trunk_stats.py.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np
from scipy.stats import t as student_t


def holm(pvalues: list[float], alpha: float = 0.05) -> tuple[list[bool], list[float]]:
    """Holm's step-down rule: (rejected?, adjusted p) per hypothesis, in the order given.

    Sort p ascending; the k-th smallest (k = 0..m-1) is rejected while p_(k) <= alpha / (m - k), and the first
    failure stops the descent. Adjusted p_(k) = max over j <= k of min(1, (m - j) p_(j)), so that "adjusted
    p <= alpha" is the same decision."""
    p = np.asarray(pvalues, dtype=np.float64)
    m = len(p)
    order = np.argsort(p, kind="stable")
    rejected = np.zeros(m, dtype=bool)
    adjusted = np.zeros(m)
    running, stopped = 0.0, False
    for k, i in enumerate(order):
        running = max(running, min(1.0, (m - k) * p[i]))
        adjusted[i] = running
        stopped = stopped or p[i] > alpha / (m - k)
        rejected[i] = not stopped
    return rejected.tolist(), adjusted.tolist()


def trunk_test(per_trunk: list[list[float]], alpha: float = 0.05, power: float = 0.80) -> dict:
    """One-sample t-test of the trunk means (each trunk's differences averaged over its captioner seeds) against
    zero, on trunks − 1 degrees of freedom; with its 95% half-width and the detectable effect at ``power``."""
    means = np.array([np.mean(t) for t in per_trunk], dtype=np.float64)
    n = len(means)
    if n < 2:
        return {"n_trunks": n, "mean": float(means.mean()) if n else None, "se": None, "df": None, "p": None,
                "half_width": None, "detectable": None, "trunk_means": means.tolist()}
    se = float(means.std(ddof=1) / np.sqrt(n))
    df = n - 1
    mean = float(means.mean())
    p = float(2 * student_t.sf(abs(mean) / se, df)) if se > 0 else (0.0 if mean else 1.0)
    t_a, t_b = student_t.ppf(1 - alpha / 2, df), student_t.ppf(power, df)
    return {"n_trunks": n, "mean": mean, "se": se, "df": df, "p": p, "half_width": float(t_a * se),
            "detectable": float((t_a + t_b) * se), "trunk_means": means.tolist()}


@dataclass(frozen=True)
class Components:
    """Variances of one paired difference: between trunks, between captioner seeds within a trunk, and per
    test image (the variance of one image's difference; the fixed test set adds ``image / n_images``)."""

    trunk: float
    seed: float
    image: float | None
    n_images: int | None

    def se2(self, trunks: int, seeds: int, images: int | None = None) -> float:
        """The squared standard error of the grand mean with this many trunks, seeds per trunk and test images
        (the image part only when the per-image variance is known)."""
        out = self.trunk / trunks + self.seed / (trunks * seeds)
        if self.image is not None:
            out += self.image / (images or self.n_images)
        return out


def components(per_trunk: list[list[float]], image_diffs: np.ndarray | None = None) -> Components:
    """Method-of-moments components of a balanced nested design (trunks, s seeds in each).

    seed = the pooled within-trunk variance (mean square within); trunk = (MS between − MS within) / s,
    floored at 0. ``image_diffs``: the per-image differences averaged over every run ([images]); its variance
    is the image component."""
    data = np.asarray(per_trunk, dtype=np.float64)
    t, s = data.shape
    ms_within = float(data.var(axis=1, ddof=1).mean()) if s > 1 else 0.0
    ms_between = float(s * data.mean(axis=1).var(ddof=1)) if t > 1 else 0.0
    trunk = max(0.0, (ms_between - ms_within) / s)
    image, n_images = None, None
    if image_diffs is not None and len(image_diffs) > 1:
        image, n_images = float(np.var(image_diffs, ddof=1)), len(image_diffs)
    return Components(trunk, ms_within, image, n_images)


def trunks_needed(effect: float, comps: Components, seeds: int, images: int | None = None,
                  alpha: float = 0.05, power: float = 0.80, most: int = 1000) -> int | None:
    """The fewest trunks whose trunk-level test detects ``effect`` (two-sided ``alpha``, ``power``), with
    ``seeds`` captioner seeds each and ``images`` test images (the image part counts only when known)."""
    for trunks in range(2, most + 1):
        df = trunks - 1
        se = np.sqrt(comps.se2(trunks, seeds, images))
        if (student_t.ppf(1 - alpha / 2, df) + student_t.ppf(power, df)) * se <= effect:
            return trunks
    return None


def images_needed(effect: float, comps: Components, trunks: int, seeds: int, alpha: float = 0.05,
                  power: float = 0.80) -> int | None:
    """The fewest test images for which ``trunks`` trunks of ``seeds`` captioner seeds detect ``effect``; None when
    no number of images is enough (the trunk and seed parts alone exceed it) or the image part is unknown.

    Solved in closed form: (t(1 - alpha/2) + t(power)) * sqrt(trunk/T + seed/(T s) + image/I) <= effect."""
    if comps.image is None:
        return None
    df = trunks - 1
    room = (effect / (student_t.ppf(1 - alpha / 2, df) + student_t.ppf(power, df))) ** 2
    room -= comps.trunk / trunks + comps.seed / (trunks * seeds)
    if room <= 0:
        return None
    return max(1, int(np.ceil(comps.image / room)))
