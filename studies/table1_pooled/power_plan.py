"""The power of Table 1's primary test before it runs (issue #56): ``python -m studies.table1_pooled.power_plan``.

The primary contrast is one number per trunk: Cap − Img in CIDEr-D, averaged over the four cells (Att2all2 and
Top-Down, after XE and after RL) and over the trunk's captioner seeds, on a fixed set of N test images. Its model:

    d_t = effect + a_t + mean over seeds s of (b_ts + e_ts),   a_t ~ (0, trunk), b_ts ~ (0, seed),
    e_ts ~ (0, interaction / N): the run × image interaction, averaged over the N test images.

The test images are fixed (the declaration's model), so an image's own main effect belongs to what is estimated
("the lift on these images"), not to the error; only the run × image interaction shrinks with more images, and it
is charged once per run, not once per trunk. So the variance of one trunk's value is
``trunk + (seed + interaction / N) / S`` and the test is a one-sample t on T trunk values, T − 1 degrees of freedom.
Its power at a true effect δ is exact under normal errors: with λ = δ / sqrt(var / T), the statistic is noncentral
t(T − 1, λ), and power = P(t > c) + P(t < −c), c = the two-sided critical value at α (scipy.stats.nct).

#46's results (docs/study_results/table1_trunks.json) give the pooled contrast's trunk and seed components at
N = 1,000 and an upper bound on the interaction: the per-image variance it printed (over images, of differences
averaged over 6 runs) is an image main effect plus interaction / 6. The plan sizes the design for the two ends of
that range, and declares the one that holds under both.

Hand-written because power for this nested design with a fixed image set is a few lines over scipy's noncentral t,
and no library in the stack plans it (statsmodels' TTestPower takes one standardised effect, no components, and is
not a dependency). tests/studies/test_power_plan.py checks the formula against simulation within ±3 points.
"""
from __future__ import annotations

import argparse
import json
import math
from dataclasses import asdict, dataclass
from pathlib import Path

import numpy as np
from scipy.optimize import brentq
from scipy.stats import chi2, nct
from scipy.stats import t as student_t

from studies.provenance import with_commit
from studies.trunks.trunk_stats import components

RESULTS = Path("docs/study_results/table1_trunks.json")


@dataclass(frozen=True)
class PooledComponents:
    """Variances of the pooled contrast: between trunks, between seeds within a trunk beyond the images'
    share (``seed``), and the run × image interaction of one image (``interaction``, divided by N per run)."""

    trunk: float
    seed: float
    interaction: float

    def trunk_value_variance(self, seeds: int, images: int) -> float:
        """The variance of one trunk's value: its own deviation, plus its seeds' mean of run-level noise."""
        return self.trunk + (self.seed + self.interaction / images) / seeds


@dataclass(frozen=True)
class Design:
    trunks: int
    seeds: int
    images: int


def power(effect: float, variance: float, trunks: int, alpha: float = 0.05) -> float:
    """Power of the two-sided one-sample t-test on ``trunks`` values of this ``variance`` at a true ``effect``."""
    if trunks < 2:
        return float("nan")
    df = trunks - 1
    lam = effect / math.sqrt(variance / trunks)
    crit = student_t.ppf(1 - alpha / 2, df)
    return float(nct.sf(crit, df, lam) + nct.cdf(-crit, df, lam))


def detectable(variance: float, trunks: int, alpha: float = 0.05, target: float = 0.80) -> float:
    """The smallest effect the test detects with probability ``target`` (exact noncentral t, not t + t)."""
    hi = math.sqrt(variance / trunks)
    while power(hi, variance, trunks, alpha) < target:  # widen the bracket until it holds the answer
        hi *= 2
    return float(brentq(lambda d: power(d, variance, trunks, alpha) - target, 0.0, hi))


def plan_components(results: dict) -> tuple[PooledComponents, PooledComponents]:
    """(fewest-interaction, most-interaction) components of the pooled contrast from #46's primary cells.

    The pooled value of trunk t, seed s is the mean of the four cells' Cap − Img differences; its nested moments
    give trunk and run-level (seed) variances at #46's image count N0. The run-level variance holds the seeds'
    own part and interaction / N0. At one end all of it is the seeds' own (no interaction: more images do not
    help); at the other the interaction is as large as both the run-level variance (× N0) and the printed
    per-image variance (× 6 runs, pooled over the four cells) allow."""
    cells = results["primary"]
    diffs = np.mean([np.asarray(c["diffs"], dtype=np.float64) for c in cells], axis=0)  # [trunks, seeds]
    comps = components(diffs.tolist())
    n0 = int(results["ran"]["test_images"])
    runs = len(results["ran"]["trunks"]) * len(results["ran"]["captioner_seeds"])
    image_bound = runs * float(np.mean([c["components"]["image"] for c in cells])) / len(cells)
    interaction = min(comps.seed * n0, image_bound)
    return (PooledComponents(comps.trunk, comps.seed, 0.0),
            PooledComponents(comps.trunk, max(0.0, comps.seed - interaction / n0), interaction))


def upper_limit(variance: float, df: int, level: float) -> float:
    """The one-sided ``level`` upper confidence limit of a variance estimated on ``df`` degrees of freedom
    (df · s² / χ²(1 − level, df)). #46's trunk component rests on 2 df, so planning on the point estimate would
    promise power the design may not have: at level .8 the limit is 4.48 times the estimate on 2 df
    (2 / χ²(.2, 2) = 2 / .446)."""
    return df * variance / chi2.ppf(1 - level, df)


def smallest_design(comps: PooledComponents, effect: float, alpha: float, target: float, seeds: tuple[int, ...],
                    images: tuple[int, ...], cost, most_trunks: int = 200) -> tuple[Design, float] | None:
    """The cheapest design (by ``cost(design)``) whose power at ``effect`` reaches ``target``, with its power."""
    best = None
    for s in seeds:
        for n in images:
            variance = comps.trunk_value_variance(s, n)
            for t in range(2, most_trunks + 1):
                p = power(effect, variance, t, alpha)
                if p >= target:
                    d = Design(t, s, n)
                    if best is None or cost(d) < cost(best[0]):
                        best = (d, p)
                    break
    return best


@dataclass(frozen=True)
class Prices:
    """Seconds of the study's pieces on the planning machine (2 cores), from ``capaware plan``'s probes."""

    trunk: float  # one trunk's data, stage one and feature dumps, less their test images' share
    image_trunk: float  # one test image's share of a trunk's feature dumps (five feature sets)
    run: float  # one captioner seed of one trunk: both models × every arm, XE then SCST, less the test images
    image_run: float  # one test image in one captioner seed: decoding and scoring, every arm and model

    def seconds(self, d: Design) -> float:
        return d.trunks * (self.trunk + d.images * self.image_trunk + d.seeds * (self.run + d.images * self.image_run))


STAGE_ONE, CAPTIONING = ("data", "stage1", "features"), ("captioners", "rl")


def stage_seconds(plans: list[Path]) -> tuple[list[float], list[float]]:
    """Each ``capaware plan --json`` file's (stage one, captioning) seconds, as two lists over the files."""
    loaded = [json.loads(Path(p).read_text()) for p in plans]
    return tuple([sum(plan[s]["seconds"] for s in stages if s in plan) for plan in loaded]
                 for stages in (STAGE_ONE, CAPTIONING))


def priced_by(small: list[Path], large: list[Path], images: tuple[int, int]) -> tuple[Prices, dict]:
    """Prices from ``capaware plan --json`` files of one trunk's pipeline (one captioner seed) at two test-image
    counts: the median over each count's files (the probes time single steps, and on a shared 2-vCPU machine
    repeated plans of one config differed up to 2.5x), the difference the images' share (floored at 0), the rest
    the fixed part. Also the spread of the probes, to print beside the price."""
    small_costs, large_costs = stage_seconds(small), stage_seconds(large)
    span = images[1] - images[0]
    parts = []
    for a, b in zip(small_costs, large_costs):
        per_image = max(0.0, (float(np.median(b)) - float(np.median(a))) / span)
        parts += [float(np.median(a)) - per_image * images[0], per_image]
    spread = {name: [min(a + b), max(a + b)] for name, a, b in zip(("stage_one_s", "captioning_s"), small_costs,
                                                                   large_costs)}
    return Prices(trunk=parts[0], image_trunk=parts[1], run=parts[2], image_run=parts[3]), spread


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m studies.table1_pooled.power_plan",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("--results", type=Path, default=RESULTS, help="#46's kept results [%(default)s]")
    parser.add_argument("--effect", type=float, default=0.03, help="CIDEr-D effect to detect [%(default)s]")
    parser.add_argument("--alpha", type=float, default=0.05)
    parser.add_argument("--power", type=float, default=0.80)
    parser.add_argument("--small", type=Path, nargs="+", required=True, metavar="PLAN",
                        help="capaware plan --json files of one trunk's pipeline at the first --priced-images")
    parser.add_argument("--large", type=Path, nargs="+", required=True, metavar="PLAN", help="... at the second")
    parser.add_argument("--priced-images", type=int, nargs=2, default=(1000, 5000))
    parser.add_argument("--machine", default="", help="the CPU the prices were probed on (written beside them)")
    parser.add_argument("--seeds", type=int, nargs="+", default=[1, 2], help="captioner seeds per trunk to consider")
    parser.add_argument("--images", type=int, nargs="+", default=[5000, 10000], help="test images to consider")
    parser.add_argument("--variance-level", type=float, default=0.8,
                        help="plan on this upper confidence limit of the trunk variance, not its estimate "
                        "[%(default)s]")
    parser.add_argument("--out", type=Path, default=None, help="also write the plan as JSON")
    args = parser.parse_args(argv)
    results = json.loads(args.results.read_text())
    prices, spread = priced_by(args.small, args.large, tuple(args.priced_images))
    plan = {"effect": args.effect, "alpha": args.alpha, "power": args.power, "prices_s": asdict(prices),
            "probe_spread_s": spread, "plans": [str(p) for p in (*args.small, *args.large)],
            "machine": args.machine, "variance_level": args.variance_level, "ends": {}}
    df = len(results["ran"]["trunks"]) - 1
    for name, comps in zip(("no_interaction", "most_interaction"), plan_components(results)):
        comps = PooledComponents(upper_limit(comps.trunk, df, args.variance_level), comps.seed, comps.interaction)
        found = smallest_design(comps, args.effect, args.alpha, args.power, tuple(args.seeds), tuple(args.images),
                                prices.seconds)
        entry = {"components": asdict(comps)}
        if found:
            d, p = found
            entry.update(design=asdict(d), power=p, cpu_hours=prices.seconds(d) / 3600,
                         detectable=detectable(comps.trunk_value_variance(d.seeds, d.images), d.trunks, args.alpha,
                                               args.power))
        plan["ends"][name] = entry
        print(f"{name}: {json.dumps(entry)}")
    designs = [e["design"] for e in plan["ends"].values() if "design" in e]
    if len(designs) == len(plan["ends"]):  # the design that holds at both ends: the larger of each
        both = Design(*(max(d[k] for d in designs) for k in ("trunks", "seeds", "images")))
        plan["declare"] = {"design": asdict(both), "cpu_hours": prices.seconds(both) / 3600,
                           "power": min(power(args.effect, PooledComponents(**e["components"]).trunk_value_variance(
                               both.seeds, both.images), both.trunks, args.alpha) for e in plan["ends"].values())}
        print(f"declare: {json.dumps(plan['declare'])}")
    if args.out:
        args.out.write_text(json.dumps(with_commit(plan), indent=1) + "\n")  # with the commit that computed it


if __name__ == "__main__":
    main()
