"""studies/self_retrieval/power_plan.py: the paired t's power and the TOST bound against simulation, and the seed
values it plans from (SR-FL − baseline per seed, averaged over the captioners)."""
import numpy as np
import pytest
from scipy import stats

from studies.self_retrieval import power_plan as power
from studies.self_retrieval.power_plan import paired_t_power, plan, seed_values, tost_power_bound


def simulate(effect, sd, seeds, draws=20000, seed=0):
    rng = np.random.default_rng(seed)
    x = rng.normal(effect, sd, size=(draws, seeds))
    return x


def test_the_paired_t_power_matches_simulation():
    for effect, sd, seeds in ((2.0, 2.5, 6), (1.0, 1.5, 10), (3.0, 2.0, 4)):
        x = simulate(effect, sd, seeds)
        p = stats.ttest_1samp(x, 0.0, axis=1).pvalue
        assert paired_t_power(effect, sd, seeds) == pytest.approx(np.mean(p < 0.05), abs=0.015)


def test_the_tost_bound_never_exceeds_the_simulated_power():
    for margin, sd, seeds in ((0.02, 0.015, 6), (0.02, 0.03, 10), (0.03, 0.02, 5)):
        x = simulate(0.0, sd, seeds, seed=1)
        lo = stats.ttest_1samp(x, -margin, axis=1, alternative="greater").pvalue
        hi = stats.ttest_1samp(x, margin, axis=1, alternative="less").pvalue
        simulated = np.mean((lo < 0.05) & (hi < 0.05))
        bound = tost_power_bound(margin, sd, seeds)
        assert bound <= simulated + 0.01 and bound >= simulated - 0.15, (bound, simulated)


def test_seed_values_pair_the_arms_and_average_the_captioners():
    rows = [{"arm": a, "seed": s, "core": c, "val_r1": v, "val_cider_d": 0.8 + v / 1000}
            for a, s, c, v in (("baseline", 0, "x", 10), ("sr_fl", 0, "x", 13), ("baseline", 0, "y", 20),
                               ("sr_fl", 0, "y", 21), ("baseline", 1, "x", 12), ("sr_fl", 1, "x", 12),
                               ("baseline", 1, "y", 15), ("sr_fl", 1, "y", 19))]
    assert seed_values(rows, "val_r1").tolist() == [2.0, 2.0]
    third = [dict(r, seed=2, val_r1=r["val_r1"] + (1 if r["arm"] == "sr_fl" else 0)) for r in rows[:4]]
    out = plan(rows + [dict(r, val_cider_d=0.8 + r["val_r1"] / 1000) for r in third], [2.0], 0.02)
    assert out["seeds_in_pilot"] == 3 and out["r1_seed_values"] == [2.0, 2.0, 3.0]
    assert out["sd"]["r1"]["upper80"] > out["sd"]["r1"]["pilot"] > 0


def test_the_price_of_a_seed_sums_its_jobs_over_the_lanes():
    rows = [{"arm": arm, "seed": s, "core": c, "seconds": sec} for arm, sec in (("baseline", 100.0), ("sr_fl", 120.0),
                                                                                 ("sr_pl", 300.0))
            for s in (0, 1) for c in ("att2all2", "topdown") if arm != "sr_pl" or s == 0]
    pilot = {"lanes": 2, "rows": rows, "xe_seconds": {"0": {"a": None, "t": 1.0}, "1": {"a": 200.0, "t": 160.0}}}
    prices = power.price(pilot)
    assert prices["xe_seed_s"] == 360.0  # seed 0's XE has no wall kept: left out
    assert prices["arm_seed_s"] == {"baseline": 200.0, "sr_fl": 240.0, "sr_pl": 600.0}
    assert power.seed_hours(prices, ["baseline", "sr_fl"], {}) == (360 + 200 + 240) / 2 / 3600
    assert power.seed_hours(prices, ["sr_pl_uniform"], {"sr_pl_uniform": "sr_pl"}) == (360 + 600) / 2 / 3600
    assert power.seed_hours(prices, ["sr_a4"], {}) is None


def test_power_is_a_number_and_grows_with_the_effect_where_scipys_lower_tail_was_nan():
    sd = 0.5107184482014854  # the world pilot's: nct.cdf(-c, 3, lam) was nan at effect 2 with 4 seeds
    powers = [paired_t_power(effect, sd, 4) for effect in (0.5, 1, 2, 3, 4)]
    assert all(np.isfinite(powers)) and powers == sorted(powers)
    rng = np.random.default_rng(0)
    x = rng.normal(2, sd, (100_000, 4))
    t = x.mean(1) / (x.std(1, ddof=1) / 2)
    assert paired_t_power(2, sd, 4) == pytest.approx(np.mean(np.abs(t) > stats.t.ppf(0.975, 3)), abs=0.005)
