"""The declared choice of the study over trunks: ``python -m studies.trunks.choose_trunk_recipe STUDY_DIR [--k 10]``.

STUDY_DIR is the finished studies/trunks/configs/trunks_caption_choice.yaml study (val queries against val images).
Prints each row's val nDCG@K and the winner (highest; a tie goes to the earlier row, the paper's squared distance and
the smaller rate first), which studies/trunks/configs/trunks_caption.yaml then fixes for every trunk.
"""
from __future__ import annotations

import argparse
from pathlib import Path

from capcore.errors import CapawareError, run_cli
from capcore.run_layout import StudyDir
from embedder.retrieval_report import load_rows

BOUNDS = ("Oracle",)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("study", help="the choice study's folder (its out_dir)")
    parser.add_argument("--k", type=int, default=10)
    args = parser.parse_args(argv)
    ret = StudyDir(Path(args.study)).retrieval
    rows = {n: r for n, r in load_rows(ret).items() if n not in BOUNDS and ("lr=" in n)}
    if not rows:
        raise CapawareError(ret, "no trained rows of the choice study",
                            "run studies/trunks/configs/trunks_caption_choice.yaml first")
    print(f"| row | val nDCG@{args.k} |\n|---|---:|")
    for name, r in rows.items():
        print(f"| {name} | {r['ndcg'][args.k - 1]:.4f} |")
    best = max(rows, key=lambda n: (rows[n]["ndcg"][args.k - 1], -rows[n]["order"]))
    distance, lr = best.split(" lr=")
    print(f"\nchosen on val: distance {distance}, lr {lr} (val nDCG@{args.k} {rows[best]['ndcg'][args.k - 1]:.4f}; "
          f"{rows[best]['n_queries']} val queries)")


if __name__ == "__main__":
    run_cli(main)
