"""Exactness of the pruned caption graph at benchmark scale: every row against brute force.

``python benchmarks/check_caption_graph_exact.py [--n 2000] [--m 30] [--workers 2]``

Brute force = our exact Eq. 13 for all N(N-1)/2 image pairs (``build_caption_graph_bruteforce``; the
test suite checks that WMD against gensim to 1e-6); pruned = ``build_caption_graph``. Prints how many
of the N rows have identical top-M indices, and the largest distance difference.
"""
from __future__ import annotations

import argparse
import shlex
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_caption_graph import shapes_captions  # noqa: E402

from embedder.labels.caption_graph import (  # noqa: E402
    CaptionSpace,
    build_caption_graph,
    build_caption_graph_bruteforce,
)
from embedder.labels.wordvecs import tokenize, train_word2vec  # noqa: E402


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--n", type=int, default=2000)
    ap.add_argument("--m", type=int, default=30)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--stopwords", default="gensim")
    args = ap.parse_args()
    print("$ python " + " ".join(shlex.quote(a) for a in sys.argv))
    captions = shapes_captions(args.n, args.seed)
    kv = train_word2vec([tokenize(s) for caps in captions for s in caps], dim=args.dim, seed=args.seed, epochs=10)
    space = CaptionSpace(captions, kv, stopwords=args.stopwords)
    t0 = time.perf_counter()
    pruned = build_caption_graph(space, m=args.m, workers=args.workers)
    t1 = time.perf_counter()
    brute = build_caption_graph_bruteforce(space, m=args.m)
    t2 = time.perf_counter()
    same_rows = int((pruned.nn_idx == brute.nn_idx).all(axis=1).sum())
    max_diff = float(np.abs(pruned.nn_dist.astype(np.float64) - brute.nn_dist).max())
    print(f"N = {args.n}, M = {args.m}: identical top-{args.m} indices in {same_rows}/{args.n} rows; "
          f"max |distance difference| = {max_diff:.2e}")
    print(f"pruned {t1 - t0:.1f} s ({pruned.attrs['emd_solves']:,} exact WMDs, {args.workers} workers); "
          f"brute force {t2 - t1:.1f} s ({brute.attrs['emd_solves']:,} exact WMDs, 1 process)")
    raise SystemExit(0 if same_rows == args.n and max_diff <= 1e-6 else 1)


if __name__ == "__main__":
    main()
