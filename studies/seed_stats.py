"""Numbers over training seeds, written once for every seed table: Table 1 over seeds
(studies.table1_seeds.results_seeds), stage one's (studies.stage_one_seeds.retrieval_seeds), the linear probes
(studies.probes.probe) and the SCST recipes (studies.scst_recipes.scst_recipes)."""
from __future__ import annotations

import numpy as np


def mean_sd(values) -> tuple[float, float | None]:
    """The mean and the sample standard deviation (ddof 1; None for a single value)."""
    a = np.asarray(values, dtype=np.float64)
    return float(a.mean()), (float(a.std(ddof=1)) if len(a) > 1 else None)


def stat(values) -> dict:
    """The values with their mean and sd, as the seed tables' JSON keeps them."""
    mean, sd = mean_sd(values)
    return {"values": [float(v) for v in values], "mean": mean, "sd": sd}


def text(s: dict | None, digits: int = 3, signed: bool = False) -> str:
    """``mean ± sd`` of a :func:`stat` (the mean alone for one seed; ``n/a`` for none)."""
    if not s:
        return "n/a"
    sign = "+" if signed else ""
    return f"{s['mean']:{sign}.{digits}f}" + ("" if s["sd"] is None else f" ± {s['sd']:.{digits}f}")


def agreement(diffs) -> int:
    """+1 when every seed's paired difference is positive, -1 when every one is negative, 0 otherwise
    (and for a single seed: one draw orders nothing)."""
    d = np.asarray(diffs, dtype=np.float64)
    if len(d) > 1 and (d > 0).all():
        return 1
    if len(d) > 1 and (d < 0).all():
        return -1
    return 0
