"""Mean ± standard deviation of nDCG@K over several runs of one study (seeds):
``python -m eval.retrieval_seeds RESULTS_DIR... [--k 1 5 10 20 50]``.

One seed's table cannot rank methods whose gaps are the size of the seed-to-seed spread; this puts
the spread next to every mean. Each RESULTS_DIR holds a ``retrieval.json`` (``embedder.study``).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from embedder.errors import CapawareError, run_cli


def seed_table(paths: list[Path], ks: tuple[int, ...]) -> str:
    runs = []
    for p in paths:
        f = Path(p) / "retrieval.json"
        if not f.is_file():
            raise CapawareError(f, "no retrieval table", "run python -m embedder.study for that seed first")
        runs.append(json.loads(f.read_text())["rows"])
    names = [n for n in runs[0] if all(n in r for r in runs)]
    ks = tuple(k for k in ks if all(len(r[n]["ndcg"]) >= k for r in runs for n in names))
    lines = [f"nDCG@K, mean ± std over {len(runs)} runs ({', '.join(str(p) for p in paths)})", "",
             "| method | " + " | ".join(f"nDCG@{k}" for k in ks) + " |", "|" + "---|" * (len(ks) + 1)]
    for n in names:
        cells = []
        for k in ks:
            v = np.array([r[n]["ndcg"][k - 1] for r in runs])
            cells.append(f"{v.mean():.3f} ± {v.std(ddof=1) if len(v) > 1 else 0.0:.3f}")
        lines.append(f"| {n} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m eval.retrieval_seeds", description=__doc__.splitlines()[0])
    parser.add_argument("results", nargs="+", help="folders with a retrieval.json, one per seed")
    parser.add_argument("--k", type=int, nargs="+", default=[1, 5, 10, 20, 50])
    args = parser.parse_args(argv)
    print(seed_table([Path(p) for p in args.results], tuple(args.k)))


if __name__ == "__main__":
    run_cli(main)
