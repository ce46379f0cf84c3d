"""The self-retrieval study's power plan, from its val pilot: ``python -m studies.self_retrieval.power_plan
PILOT_JSON [--out FILE.json] [--effects 1 2 3 4] [--margin 0.02]``.

The study's unit is the captioner seed: both arms start from the seed's XE run, so a seed gives one paired value,
SR-FL − baseline, averaged over the two captioners. The primary test is a one-sample t on those values against 0
(two-sided, alpha .05); with S seeds its power at a true effect delta is exact under normal errors, the statistic
being noncentral t(S − 1, delta / (sd / sqrt(S))). The co-primary is CIDEr-D by equivalence (TOST at ±margin): its
power at a true difference of 0 is bounded below by P(lower test rejects) + P(upper test rejects) − 1, each a
noncentral-t tail, the bound used here (so the plan never promises more than it has).

The pilot's sd of the seed values comes from 3 seeds (2 degrees of freedom): the plan sizes the design at that sd and
at its one-sided 80% upper confidence bound (sd x sqrt(df / chi2_{.2}(df))), and names the seeds that hold under
both. The pilot ranks val's images, the study test's: the seeds' spread is taken to carry over (a larger gallery
lowers R@1 and may change it; the declaration says so).

Hand-written as studies/table1_pooled/power_plan.py is, for the same reason: scipy's noncentral t in a few lines;
tests/studies/test_self_retrieval_power.py checks both powers against simulation.
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
from scipy.stats import chi2, nct
from scipy.stats import t as student_t

from capcore.atomic import write_text
from studies.provenance import with_commit

ALPHA, TARGET = 0.05, 0.80


def paired_t_power(effect: float, sd: float, seeds: int, alpha: float = ALPHA) -> float:
    """Power of the two-sided one-sample t on ``seeds`` values of sd ``sd`` when their mean is ``effect``."""
    df = seeds - 1
    lam = effect / (sd / math.sqrt(seeds))
    c = student_t.ppf(1 - alpha / 2, df)
    # the lower tail as the upper tail at -lam (the same number): scipy's nct.cdf far below a large noncentrality
    # returns nan (e.g. cdf(-3.18, 3, 11.7)), which made the plan skip seed counts that reach the power
    return float(nct.sf(c, df, lam) + nct.sf(c, df, -lam))


def tost_power_bound(margin: float, sd: float, seeds: int, true: float = 0.0, alpha: float = ALPHA) -> float:
    """A lower bound of TOST's power (both one-sided tests at ``alpha``) at a true difference ``true``."""
    df, se = seeds - 1, sd / math.sqrt(seeds)
    c = student_t.ppf(1 - alpha, df)
    lower = nct.sf(c, df, (true + margin) / se)  # H0: mean <= -margin
    upper = nct.sf(c, df, (margin - true) / se)  # H0: mean >= +margin
    return float(max(0.0, lower + upper - 1))


def seed_values(rows: list[dict], key: str) -> np.ndarray:
    """Per seed: SR-FL − baseline of ``key``, averaged over the captioners the seed has both arms of."""
    by = {(r["arm"], r["seed"], r["core"]): r[key] for r in rows}
    seeds = sorted({r["seed"] for r in rows})
    return np.array([np.mean([by[("sr_fl", s, c)] - by[("baseline", s, c)] for c in sorted({r["core"] for r in rows})
                              if ("sr_fl", s, c) in by and ("baseline", s, c) in by]) for s in seeds])


def upper_sd(sd: float, df: int, level: float = 0.8) -> float:
    return sd * math.sqrt(df / chi2.ppf(1 - level, df))


def smallest(power, target: float = TARGET, most: int = 60) -> int | None:
    return next((n for n in range(3, most + 1) if power(n) >= target), None)


def plan(rows: list[dict], effects: list[float], margin: float) -> dict:
    r1, cider = seed_values(rows, "val_r1"), seed_values(rows, "val_cider_d")
    df = len(r1) - 1
    if df < 1:
        raise ValueError("the pilot needs two or more seeds with both arms")
    sds = {"r1": float(r1.std(ddof=1)), "cider_d": float(cider.std(ddof=1))}
    ends = {k: {"pilot": v, "upper80": upper_sd(v, df)} for k, v in sds.items()}
    primary = {f"{e:g}": {end: smallest(lambda n, sd=sd, e=e: paired_t_power(e, sd, n))
                          for end, sd in ends["r1"].items()} for e in effects}
    co = {end: smallest(lambda n, sd=sd: tost_power_bound(margin, sd, n)) for end, sd in ends["cider_d"].items()}
    return {"seeds_in_pilot": len(r1), "r1_seed_values": r1.tolist(), "cider_d_seed_values": cider.tolist(),
            "sd": ends, "alpha": ALPHA, "target_power": TARGET,
            "seeds_for_primary_by_effect_points": primary, "tost_margin": margin, "seeds_for_tost": co}


def price(pilot: dict) -> dict:
    """Hours of wall per seed, from the pilot's job walls (run ``lanes`` at a time, so a seed's wall is about the sum
    of its jobs' walls over the lanes): the seed's two XE runs and each arm's two SCST runs, the mean over the seeds
    the pilot ran it on. An arm the pilot did not run is priced as the nearest one it did (``twins``)."""
    lanes = pilot.get("lanes", 2)
    xe = [sum(v.values()) for v in (pilot.get("xe_seconds") or {}).values() if None not in v.values()]
    arm = {}
    for name in sorted({r["arm"] for r in pilot["rows"]}):
        per_seed = {}
        for r in pilot["rows"]:
            if r["arm"] == name and r.get("seconds") is not None:
                per_seed[r["seed"]] = per_seed.get(r["seed"], 0.0) + r["seconds"]
        arm[name] = float(np.mean(list(per_seed.values()))) if per_seed else None
    return {"lanes": lanes, "xe_seed_s": float(np.mean(xe)) if xe else None, "arm_seed_s": arm}


def seed_hours(prices: dict, arms: list[str], twins: dict[str, str]) -> float | None:
    """One seed's wall in hours for these arms (an arm missing from the pilot priced as its twin)."""
    cost = [prices["arm_seed_s"].get(a, prices["arm_seed_s"].get(twins.get(a, a))) for a in arms]
    if prices["xe_seed_s"] is None or None in cost:
        return None
    return (prices["xe_seed_s"] + sum(cost)) / prices["lanes"] / 3600


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("pilot", help="pilot.json of studies.self_retrieval.run_pilot")
    p.add_argument("--out", default=None, help="the plan's JSON (default: beside the pilot)")
    p.add_argument("--effects", type=float, nargs="+", default=[1.0, 2.0, 3.0, 4.0], help="R@1 points")
    p.add_argument("--margin", type=float, default=0.02, help="CIDEr-D equivalence margin")
    a = p.parse_args(argv)
    pilot = json.loads(Path(a.pilot).read_text())
    out = plan(pilot["rows"], a.effects, a.margin)
    prices = price(pilot)
    twins = {"sr_a4": "sr_fl", "sr_vse0": "sr_fl", "sr_pl_uniform": "sr_pl"}
    out.update(pilot=str(Path(a.pilot).resolve()), pilot_machine=pilot.get("machine"), price=prices,
               hours_per_seed={"primary": seed_hours(prices, ["baseline", "sr_fl"], twins),
                               "with_secondary": seed_hours(prices, ["baseline", "sr_fl", "sr_pl", "sr_pl_uniform",
                                                                     "sr_a4", "sr_vse0"], twins)})
    path = Path(a.out) if a.out else Path(a.pilot).with_name("power_plan.json")
    write_text(path, json.dumps(with_commit(out), indent=1))
    print(json.dumps(out, indent=1) + f"\n-> {path}")


if __name__ == "__main__":
    main()
