"""Caption neighbour graph (Kim et al. Eq. 13 over WMD): pruned exact build vs gensim brute force.

``python benchmarks/bench_caption_graph.py [--sizes 500 1000 2000] [--m 30] [--dim 300] [--workers 2]
[--brute-pairs 200] [--check-queries 2]``

Captions come from the shapes-captions generator (``capdata.synthetic.shapes_captions``; a small
local template generator if that module is missing), five per image, no images rendered; word2vec
is trained on them (``--dim``, the GoogleNews width by default). Per size N:

* pruned: ``build_caption_graph`` (WCD/RWMD bounds, exact EMD only where needed): wall time with
  ``--workers`` processes, CPU seconds inside query chunks, and its count of exact caption-pair WMDs;
* brute force: gensim ``KeyedVectors.wmdistance`` in a double loop over the 5x5 caption pairs of
  every image pair (Eq. 13). Running it fully is out of reach (N^2/2 x 25 calls), so it is timed on
  ``--brute-pairs`` random image pairs and scaled to N(N-1)/2 pairs -- its cost per pair does not
  depend on N; the output says so. Same for our own exact W without pruning (to separate the gain
  of the implementation from the gain of pruning);
* exactness: ``--check-queries`` random images get their full gensim row (N - 1 image pairs) and
  the top-M by (distance, index) is compared with the pruned graph.

Costs are CPU seconds (``time.process_time``): on a machine shared with other jobs they are far
steadier than wall time. Projection to the 113,287 Karpathy training images: brute force = CPU
seconds per image pair x N(N-1)/2, divided by the cores (embarrassingly parallel). Pruned = sweep +
search, in CPU seconds inside query chunks (process start-up excluded; chunks are independent, so
scaling over processes is assumed linear), divided by cores: the sweep (set-level bounds against all
N) is O(N^2) and scaled quadratically from the largest size; the search (RWMD batches, exact EMD)
follows a power law a * N^b fitted to the measured sizes. Caveat: the synthetic captions have a
~60-word vocabulary and very similar sentences, so COCO's pruning rate can differ either way.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from embedder.labels.caption_graph import build_caption_graph  # noqa: E402
from embedder.labels.caption_space import CaptionSpace  # noqa: E402
from embedder.labels.wmd import wmd  # noqa: E402
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


def gensim_pair_seconds(kv, docs, img_ptr, pairs) -> float:
    """Seconds per image pair of Eq. 13 through gensim ``wmdistance`` (25 calls for 5 x 5 captions)."""
    start = time.process_time()
    for a, b in pairs:
        xs, ys = docs[img_ptr[a]:img_ptr[a + 1]], docs[img_ptr[b]:img_ptr[b + 1]]
        d = np.array([[kv.wmdistance(x, y) for y in ys] for x in xs])
        d.min(axis=1).sum() + d.min(axis=0).sum()
    return (time.process_time() - start) / len(pairs)


def ours_pair_seconds(space, pairs) -> float:
    """Seconds per image pair of Eq. 13 through our exact ``wmd`` (no pruning, no cache)."""
    start = time.process_time()
    for a, b in pairs:
        xs, ys = space.captions_of(a), space.captions_of(b)
        d = np.array([[wmd(space.prep, int(x), int(y)) for y in ys] for x in xs])
        d.min(axis=1).sum() + d.min(axis=0).sum()
    return (time.process_time() - start) / len(pairs)


def gensim_row(kv, docs, img_ptr, q, n) -> np.ndarray:
    xs = docs[img_ptr[q]:img_ptr[q + 1]]
    row = np.full(n, np.inf)
    for c in range(n):
        if c != q:
            d = np.array([[kv.wmdistance(x, y) for y in docs[img_ptr[c]:img_ptr[c + 1]]] for x in xs])
            row[c] = d.min(axis=1).sum() + d.min(axis=0).sum()
    return row


def hours(seconds: float) -> str:
    return f"{seconds / 3600:,.1f} h" if seconds < 3600 * 24 * 365 else f"{seconds / 3600 / 24 / 365:,.1f} years"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--m", type=int, default=30)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=128)
    ap.add_argument("--brute-pairs", type=int, default=200, help="image pairs timed for the brute forces")
    ap.add_argument("--check-queries", type=int, default=2, help="images checked against a full gensim row")
    ap.add_argument("--stopwords", default="gensim")
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args()
    sizes = sorted(args.sizes)

    print("$ python " + " ".join(shlex.quote(a) for a in sys.argv))
    print(f"python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs visible, "
          f"{args.workers} worker processes for the pruned build; costs are CPU seconds (process_time), "
          f"which a busy shared machine inflates less than wall time")
    captions = shapes_captions(max(sizes), args.seed)
    start = time.perf_counter()
    kv = train_word2vec([tokenize(s) for caps in captions for s in caps], dim=args.dim, seed=args.seed, epochs=10)
    print(f"captions: shapes-captions generator, 5 per image; word2vec dim {args.dim} on {max(sizes)} images "
          f"({len(kv)} words, {time.perf_counter() - start:.1f} s); stop words: {args.stopwords}; M = {args.m}")
    stop = stopword_set(args.stopwords)
    rng = np.random.default_rng(args.seed)

    rows = []
    for n in sizes:
        space = CaptionSpace(captions[:n], kv, stopwords=args.stopwords)
        docs = [caption_words(s, kv.key_to_index, stop) for caps in captions[:n] for s in caps]  # what WMD sees
        graph = build_caption_graph(space, m=args.m, workers=args.workers, chunk=args.chunk, progress=False)
        pruned_s, solves = graph.stats["seconds"], graph.stats["emd_solves"]
        core_s, sweep_s = graph.stats["chunk_cpu_seconds"], graph.stats["sweep_cpu_seconds"]
        n_pairs = n * (n - 1) // 2
        a = rng.integers(0, n, args.brute_pairs)
        b = (a + rng.integers(1, n, args.brute_pairs)) % n
        pairs = list(zip(a.tolist(), b.tolist()))
        g_pair = gensim_pair_seconds(kv, docs, space.img_ptr, pairs)
        o_pair = ours_pair_seconds(space, pairs)
        brute_solves = graph.stats["brute_force_solves"]
        checked = []
        for q in rng.choice(n, args.check_queries, replace=False).tolist():
            row = gensim_row(kv, docs, space.img_ptr, q, n)
            order = np.lexsort((np.arange(n), row))[:args.m]
            same_idx = np.array_equal(order, graph.nn_idx[q])
            err = float(np.abs(row[order] - graph.nn_dist[q]).max())
            checked.append((q, same_idx, err))
        rows.append(dict(n=n, pruned_s=pruned_s, core_s=core_s, sweep_s=sweep_s, solves=solves, g_pair=g_pair,
                         o_pair=o_pair, brute_s=g_pair * n_pairs, ours_s=o_pair * n_pairs, brute_solves=brute_solves,
                         checked=checked))
        r = rows[-1]
        print(f"\nN = {n}: {n_pairs:,} image pairs; brute force = {brute_solves:,} caption-pair WMDs")
        print(f"  pruned, ours         {pruned_s:8.1f} s wall ({args.workers} processes), "
              f"{core_s:8.1f} CPU-s in chunks (sweep {sweep_s:.1f}), {solves:>11,} exact WMDs ({brute_solves / solves:,.0f}x fewer)")
        print(f"  brute, gensim        {r['brute_s']:8.1f} CPU-s (1 process), {brute_solves:>11,} wmdistance calls; "
              f"EXTRAPOLATED from {len(pairs)} timed image pairs ({g_pair * 1e3:.2f} ms/pair)")
        print(f"  brute, our exact W   {r['ours_s']:8.1f} CPU-s (1 process), {brute_solves:>11,} WMDs; "
              f"EXTRAPOLATED from the same pairs ({o_pair * 1e3:.2f} ms/pair)")
        print(f"  ratios: gensim brute / pruned = {r['brute_s'] / core_s:,.0f}x in CPU time "
              f"({r['brute_s'] / pruned_s:,.0f}x brute on 1 core vs pruned wall on {args.workers}); "
              f"of which implementation (gensim / our exact W) {g_pair / o_pair:.1f}x "
              f"and pruning (our exact W / pruned) {r['ours_s'] / core_s:.1f}x")
        for q, same, err in checked:
            print(f"  exactness: image {q} top-{args.m} vs its full gensim row: indices "
                  f"{'identical' if same else 'DIFFER'}, max |distance difference| {err:.1e} (float32 file)")

    print(f"\nProjection to N = {COCO_TRAIN:,} (Karpathy COCO train), 5 captions per image:")
    n_coco_pairs = COCO_TRAIN * (COCO_TRAIN - 1) / 2
    g_pair = float(np.median([r["g_pair"] for r in rows]))
    if len(rows) >= 2:
        ns = np.log([r["n"] for r in rows])
        b, a = np.polyfit(ns, np.log([r["core_s"] - r["sweep_s"] for r in rows]), 1)
        bs, _ = np.polyfit(ns, np.log([r["solves"] for r in rows]), 1)
        search_s = float(np.exp(a + b * np.log(COCO_TRAIN)))
        big = rows[-1]
        sweep_s = big["sweep_s"] * (COCO_TRAIN / big["n"]) ** 2
        pruned_core_s = search_s + sweep_s
        print(f"  pruned = sweep + search. Sweep (set-level bounds of every query against all N, dense "
              f"matrix products): O(N^2), scaled from N = {big['n']}: {sweep_s / 3600:,.1f} core-h. Search "
              f"(RWMD batches + exact EMD): CPU-seconds ~ N^{b:.2f}, fitted on N = "
              f"{', '.join(str(r['n']) for r in rows)} (exact WMDs ~ N^{bs:.2f}): {search_s / 3600:,.1f} core-h. "
              f"Assumes that growth continues to COCO size and linear scaling over processes (chunks are "
              f"independent); memory per process ~ {5 * COCO_TRAIN * args.dim * 4 / 2**30:.1f} GiB "
              f"(float32 caption centroids)")
    else:
        pruned_core_s = None
        print("  pruned: give at least two --sizes to fit a growth exponent")
    print(f"  brute force (gensim): {g_pair * 1e3:.2f} ms per image pair x {n_coco_pairs:,.0f} pairs "
          "(O(N^2), embarrassingly parallel)")
    for cores in (2, 16):
        line = f"  {cores:2d} cores: brute force {hours(g_pair * n_coco_pairs / cores)}"
        if pruned_core_s is not None:
            line += f", pruned {hours(pruned_core_s / cores)} ({g_pair * n_coco_pairs / pruned_core_s:,.0f}x)"
        print(line)


if __name__ == "__main__":
    main()
