"""How much does each attribute group move the caption label distance? A diagnosis for stage one's caption track.

``python -m studies.caption_labels.caption_label_weights CAPTION_CONFIG [key=value ...] [--pairs N]``

Stage one can only learn what the label distance rewards. For N random pairs of the track's test images this
fits the caption distance D(y_i, y_j) (Eq. 13, the config's label space) by least squares on, per group, how
much the two scenes differ: the Jaccard distance of their shape, colour, size, position (3 x 3 regions) and
kind (coloured shape) sets, and whether their object count and background differ. Printed per group: the
standardised weight (the change in D, in its own standard deviations, for one standard deviation of the
group's difference), and the share of D's variance lost when the group is dropped (its unique share). A
group with a small unique share gives the loss little reason to keep it in the embedding, whatever the
probes ask.
"""
from __future__ import annotations

import argparse

import numpy as np

from capcore.errors import CapawareError, run_cli
from embedder.config import load_config
from embedder.track import prepare_track
from studies.probes.probe import probed_tags

SET_GROUPS = ("shape", "colour", "object", "size", "position")
ONE_VALUE = ("count", "background")


def jaccard(a: set, b: set) -> float:
    return 1.0 - len(a & b) / len(a | b) if a | b else 0.0


def differences(tags: list[list[str]], i: np.ndarray, j: np.ndarray) -> dict[str, np.ndarray]:
    """Per group, [P] how much scene i differs from scene j (Jaccard for sets, 0/1 for one-value groups)."""
    by_group = [{g: {t for t in ts if t.startswith(g + ":")} for g in (*SET_GROUPS, *ONE_VALUE)} for ts in tags]
    out = {g: np.array([jaccard(by_group[a][g], by_group[b][g]) for a, b in zip(i, j)]) for g in SET_GROUPS}
    out.update({g: np.array([float(by_group[a][g] != by_group[b][g]) for a, b in zip(i, j)]) for g in ONE_VALUE})
    return out


def r2(x: np.ndarray, y: np.ndarray) -> float:
    a = np.hstack([np.ones((len(x), 1)), x])
    resid = y - a @ np.linalg.lstsq(a, y, rcond=None)[0]
    return 1.0 - resid.var() / y.var()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--pairs", type=int, default=20000)
    a = parser.parse_args(argv)
    cfg = load_config(a.config, a.overrides)
    track = prepare_track(cfg)
    records = track.eval_records
    if records.attributes is None or records.objects is None:
        raise CapawareError(cfg.data.root, "the caption set records no scene attributes",
                            "run this on a synthetic caption set (python -m capdata.synthetic captions)")
    tags = [ts + sorted({f"object:{o['colour']} {o['shape']}" for o in objs})  # the kinds (coloured shapes)
            for ts, objs in zip(probed_tags(records), records.objects)]
    rng = np.random.default_rng(0)
    q = np.asarray(track.query_idx)
    i, j = rng.choice(q, a.pairs), rng.choice(q, a.pairs)
    keep = i != j
    i, j = i[keep], j[keep]
    dist = np.array([track.eval_space.pairwise(np.array([x]), np.array([y]))[0, 0] for x, y in zip(i, j)], np.float64)
    diff = differences(tags, i, j)
    groups = list(diff)
    x = np.stack([diff[g] for g in groups], 1)
    z = (x - x.mean(0)) / (x.std(0) + 1e-12)
    coef = np.linalg.lstsq(np.hstack([np.ones((len(z), 1)), z]), (dist - dist.mean()) / dist.std(), rcond=None)[0][1:]
    full = r2(z, dist)
    print(f"Caption distance against scene differences: {len(dist)} random test pairs of {a.config} "
          f"{' '.join(a.overrides)}; R² of all groups {full:.3f}\n")
    print("| group | mean difference | corr. with D | standardised weight | unique share of D's variance |")
    print("|---|---:|---:|---:|---:|")
    for k, g in enumerate(groups):
        unique = full - r2(np.delete(z, k, 1), dist)
        corr = np.corrcoef(x[:, k], dist)[0, 1]
        print(f"| {g} | {x[:, k].mean():.3f} | {corr:+.3f} | {coef[k]:+.3f} | {unique:.3f} |")


if __name__ == "__main__":
    run_cli(main)
