"""Caption neighbour graph (Kim et al. Eq. 13 over WMD): pruned exact build vs gensim in a process pool.

``python benchmarks/bench_caption_graph.py [--sizes 300] [--m 30] [--dim 300] [--workers 2]``

Captions come from the shapes-captions generator (``capdata.synthetic.shapes_captions``), five per
image, no images rendered; word2vec is trained on them (``--dim``, the GoogleNews width by default).
Per size N, three whole graphs, each run to the end and timed on the wall clock:

* pruned: ``build_caption_graph`` (WCD/RWMD bounds, exact EMD only where needed), ``--workers``
  processes;
* gensim in a pool: what a user without capaware would run -- ``KeyedVectors.wmdistance`` for the
  25 caption pairs of every image pair (N(N-1)/2 of them, each once), the query rows spread over a
  ``multiprocessing`` pool of ``--workers`` processes, then the top-M of every row;
* our exact W without pruning (``build_caption_graph_bruteforce``, one process), to separate the
  gain of the implementation from the gain of pruning.

Exactness: every row's top-M indices of the pruned graph against gensim's, and the largest distance
difference. The brute forces grow as N^2, so sizes stay small here; the pruned build alone is
measured up to 20,000 images, with the COCO estimate, by ``benchmarks/bench_caption_graph_scale.py``.
"""
from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from embedder.labels.caption_graph import (  # noqa: E402
    build_caption_graph,
    build_caption_graph_bruteforce,
)
from embedder.labels.caption_space import CaptionSpace  # noqa: E402
from embedder.labels.wordvecs import (  # noqa: E402
    caption_words,
    stopword_set,
    tokenize,
    train_word2vec,
)

COCO_TRAIN = 113_287


def shapes_captions(n: int, seed: int) -> list[list[str]]:
    """n images x 5 captions (strings) from the shapes-captions generator, no images rendered."""
    from capdata.synthetic import item_rng
    from capdata.synthetic.shapes_captions import make_captions, sample_scene

    out = []
    for i in range(n):
        rng = item_rng(seed, "captions", i)
        scene = sample_scene(rng, 128)
        out.append([" ".join(tokens) for tokens, _ in make_captions(rng, scene, 128)])
    return out


_POOL: dict = {}


def _init_pool(kv, docs, img_ptr) -> None:
    _POOL.update(kv=kv, docs=docs, img_ptr=img_ptr)


def _gensim_upper_row(q: int) -> tuple[int, np.ndarray]:
    """Eq. 13 through gensim ``wmdistance`` between image q and every image after it."""
    kv, docs, ptr = _POOL["kv"], _POOL["docs"], _POOL["img_ptr"]
    xs = docs[ptr[q]:ptr[q + 1]]
    row = np.empty(len(ptr) - 2 - q)
    for j, c in enumerate(range(q + 1, len(ptr) - 1)):
        d = np.array([[kv.wmdistance(x, y) for y in docs[ptr[c]:ptr[c + 1]]] for x in xs])
        row[j] = d.min(axis=1).sum() + d.min(axis=0).sum()
    return q, row


def gensim_pool_graph(kv, docs, img_ptr, n: int, m: int, workers: int) -> tuple[np.ndarray, np.ndarray]:
    full = np.full((n, n), np.inf)
    ctx = mp.get_context("fork")
    with ctx.Pool(workers, initializer=_init_pool, initargs=(kv, docs, img_ptr)) as pool:
        for q, row in pool.imap_unordered(_gensim_upper_row, range(n - 1), chunksize=4):
            full[q, q + 1:] = row
            full[q + 1:, q] = row
    idx = np.stack([np.lexsort((np.arange(n), full[q]))[:m] for q in range(n)])
    return idx, np.take_along_axis(full, idx, 1)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[300])
    ap.add_argument("--m", type=int, default=30)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--stopwords", default="gensim")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = sorted(args.sizes)

    print("$ python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"{cpu_line()}; python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs visible, "
          f"{args.workers} worker processes for the pruned build and the gensim pool; wall-clock seconds; "
          f"load average before start {os.getloadavg()[0]:.2f}")
    captions = shapes_captions(max(sizes), args.seed)
    kv = train_word2vec([tokenize(s) for caps in captions for s in caps], dim=args.dim, seed=args.seed, epochs=10)
    print(f"captions: shapes-captions generator, 5 per image; word2vec dim {args.dim} ({len(kv)} words); "
          f"stop words: {args.stopwords}; M = {args.m}")
    stop = stopword_set(args.stopwords)
    for n in sizes:
        space = CaptionSpace(captions[:n], kv, stopwords=args.stopwords)
        docs = [caption_words(s, kv.key_to_index, stop) for caps in captions[:n] for s in caps]  # what WMD sees
        graph = build_caption_graph(space, m=args.m, workers=args.workers, chunk=args.chunk, progress=False)
        pruned_s = graph.stats["seconds"]
        start = time.perf_counter()
        g_idx, g_dist = gensim_pool_graph(kv, docs, space.img_ptr, n, args.m, args.workers)
        gensim_s = time.perf_counter() - start
        start = time.perf_counter()
        ours = build_caption_graph_bruteforce(CaptionSpace(captions[:n], kv, stopwords=args.stopwords), args.m,
                                              progress=False)
        ours_s = time.perf_counter() - start
        same = int((g_idx == graph.nn_idx).all(axis=1).sum())
        diff = float(np.abs(g_dist - graph.nn_dist.astype(np.float64)).max())
        calls = graph.stats["brute_force_solves"]
        print(f"\nN = {n}: {n * (n - 1) // 2:,} image pairs, {calls:,} caption-pair WMDs for a brute force")
        print(f"  pruned, ours ({args.workers} processes)      {pruned_s:8.1f} s  "
              f"{graph.stats['emd_solves']:>11,} exact WMDs")
        print(f"  gensim wmdistance, pool of {args.workers}        {gensim_s:8.1f} s  {calls:>11,} calls   "
              f"-> pruned is {gensim_s / pruned_s:,.1f}x faster")
        print(f"  our exact W, no pruning (1 process)  {ours_s:8.1f} s  {ours.attrs['emd_solves']:>11,} WMDs")
        print(f"  exactness: top-{args.m} indices identical to gensim's in {same}/{n} rows, max |distance "
              f"difference| {diff:.1e} (float32 file)")


if __name__ == "__main__":
    main()
