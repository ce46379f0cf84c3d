"""Stage one's share of the label ceiling over training seeds:
``python -m studies.caption_labels.ceiling_seeds FILE...``.

Each FILE is a ``ceiling_shares.json`` that studies/caption_labels/caption_label_ceiling.py wrote for one seed's
caption track.
Prints, per row, nDCG@10 and the share of the Img-to-ceiling gap as mean ± sd with every seed's value and how many
seeds reach half the gap (issue #35 asks the chosen Cap row for >= 50% on 3 of 3 seeds).
"""
from __future__ import annotations

import sys

import numpy as np

from capcore.errors import run_cli
from studies.json_files import read_json_files

TARGET = 0.5


def load(paths: list[str]) -> list[dict]:
    return read_json_files(paths, "run python -m studies.caption_labels.caption_label_ceiling on that seed's "
                                  "study first")


def table(seeds: list[dict]) -> str:
    rows = [r for r in seeds[0]["rows"] if all(r in s["rows"] for s in seeds)]
    lines = ["| row | seeds | nDCG@10 | share of the gap to the ceiling | per seed | seeds >= 50% |",
             "|---|---:|---:|---:|---|---:|"]
    for r in rows:
        nd = np.array([s["rows"][r]["ndcg"] for s in seeds])
        sh = np.array([s["rows"][r]["ceiling_share"] for s in seeds])
        per = ", ".join(f"{s['seed']}: {v:+.0%}" for s, v in zip(seeds, sh))
        lines.append(f"| {r} | {len(seeds)} | {nd.mean():.3f} ± {nd.std(ddof=1) if len(nd) > 1 else 0:.3f} | "
                     f"{sh.mean():+.0%} ± {sh.std(ddof=1) if len(sh) > 1 else 0:.0%} | {per} | "
                     f"{int((sh >= TARGET).sum())} of {len(sh)} |")
    ceil = ", ".join(f"{s['seed']}: {s['ceiling_ndcg']:.3f}" for s in seeds)
    return "\n".join(lines) + (f"\n\nCeiling ({seeds[0]['ceiling']}) nDCG@10 per seed: {ceil}. Each seed's own class "
                               "pretraining is its Img row (the +0% of the gap) and its own 300 test queries.\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if {"-h", "--help"} & set(argv):
        print(__doc__.strip())
        return
    if not argv:
        raise SystemExit(__doc__)
    print(table(load(argv)))


if __name__ == "__main__":
    run_cli(main)
