"""The exact caption graph measured up to 20,000 images on a COCO-sized vocabulary, and the COCO estimate
interpolated from it.

``python benchmarks/bench_caption_graph_scale.py [--sizes 2000 5000 10000 20000] [--vocab 12000]
[--workers 2] [--check-rows 3] [--json FILE]``

Captions (no images): a vocabulary of ``--vocab`` made-up content words drawn with Zipf frequencies
(exponent 1.05, as word counts in English and in COCO's captions roughly follow) plus English function
words. Each image is a scene of 2-4 "objects" and 1-3 "attributes" drawn from that Zipf law; each of
its 5 captions (8-14 tokens, COCO's mean is about 10.5) names most of the objects, some attributes,
a few words of its own from the same Zipf law, and function words. So images share frequent words,
rare words make most of the vocabulary, and the 5 captions of an image agree in part, as in COCO.
Word vectors: skip-gram word2vec (300-D, the GoogleNews width) trained on all the captions, so words of
one scene lie near each other. No real vectors are used: none ship in a PyPI package reachable here.

Per size N (the first N images): ``build_caption_graph`` with ``--workers`` processes, wall seconds and
exact caption-pair WMDs; exactness: ``--check-rows`` random rows of the graph against that query's
whole brute-force row (N - 1 image pairs of 25 exact WMDs each, ``CaptionSpace.pairwise``; that WMD
is tested against gensim's ``wmdistance`` to 1e-6 in the test suite): same top-M indices, largest
distance difference. The COCO estimate (113,287 images) extends the measured seconds per image
along the log-log line through the two largest sizes (the trend between measured points, not a fit
to small sizes); the output prints every measured point so the trend can be judged.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import shlex
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from embedder.labels.caption_graph import build_caption_graph  # noqa: E402
from embedder.labels.caption_space import CaptionSpace  # noqa: E402
from embedder.labels.wordvecs import tokenize, train_word2vec  # noqa: E402

COCO_TRAIN = 113_287
FUNCTION = ("a an the two three some of on in with at near next to by and is are sitting standing "
            "there this that its their from under over").split()
SYLLABLES = "ba be bi bo bu ka ke ki ko ku la le li lo lu ma me mi mo mu na ne ni no nu ra re ri ro ru sa se si so " \
            "su ta te ti to tu va ve vi vo vu za ze zi zo zu".split()


def made_up_words(n: int, rng: np.random.Generator) -> list[str]:
    """``n`` distinct pronounceable tokens (3-4 syllables), none an English function word."""
    words: set[str] = set()
    while len(words) < n:
        words.add("".join(rng.choice(SYLLABLES, rng.integers(3, 5))))
    return sorted(words)


def zipf_captions(n_images: int, vocab: int, seed: int = 0, exponent: float = 1.05) -> list[list[str]]:
    rng = np.random.default_rng(seed)
    words = np.array(made_up_words(vocab, rng))
    p = 1.0 / np.arange(1, vocab + 1) ** exponent
    p /= p.sum()
    out = []
    for _ in range(n_images):
        objects = words[rng.choice(vocab, rng.integers(2, 5), p=p)]
        attributes = words[rng.choice(vocab, rng.integers(1, 4), p=p)]
        caps = []
        for _ in range(5):
            content = list(rng.choice(objects, max(1, len(objects) - rng.integers(0, 2)), replace=False))
            content += list(rng.choice(attributes, rng.integers(0, len(attributes) + 1), replace=False))
            content += list(words[rng.choice(vocab, rng.integers(0, 3), p=p)])
            length = int(rng.integers(8, 15))
            filler = list(rng.choice(FUNCTION, max(0, length - len(content))))
            tokens = content + filler
            rng.shuffle(tokens)
            caps.append(" ".join(tokens))
        out.append(caps)
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2000, 5000, 10000, 20000])
    ap.add_argument("--vocab", type=int, default=12000)
    ap.add_argument("--m", type=int, default=30)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--workers", type=int, default=2)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--check-rows", type=int, default=3, help="rows per size checked against their brute-force row")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    sizes = sorted(a.sizes)
    print("$ python " + " ".join(shlex.quote(x) for x in sys.argv))
    print(f"{cpu_line()}; python {platform.python_version()}, numpy {np.__version__}, {os.cpu_count()} CPUs visible, "
          f"{a.workers} worker processes; load average before start {os.getloadavg()[0]:.2f}")
    captions = zipf_captions(max(sizes), a.vocab, a.seed)
    tokens = [tokenize(s) for caps in captions for s in caps]
    counts: dict[str, int] = {}
    for t in tokens:
        for w in t:
            counts[w] = counts.get(w, 0) + 1
    content = sorted((c for w, c in counts.items() if w not in FUNCTION), reverse=True)
    start = time.perf_counter()
    kv = train_word2vec(tokens, dim=a.dim, seed=a.seed, epochs=5)
    print(f"captions: {len(tokens):,} ({max(sizes):,} images x 5), mean {np.mean([len(t) for t in tokens]):.1f} "
          f"tokens; {len(content):,} distinct content words used (of {a.vocab:,}), the most frequent "
          f"{content[0]:,} times, {sum(c == 1 for c in content):,} once; word2vec {a.dim}-D "
          f"in {time.perf_counter() - start:.0f} s; M = {a.m}")
    rng = np.random.default_rng(a.seed)
    rows = []
    for n in sizes:
        space = CaptionSpace(captions[:n], kv)
        graph = build_caption_graph(space, m=a.m, workers=a.workers, chunk=a.chunk, progress=False)
        wall, solves, brute = graph.stats["seconds"], graph.stats["emd_solves"], graph.stats["brute_force_solves"]
        checks = []
        space._cache.clear()  # the check recomputes every WMD of its rows
        for q in rng.choice(n, a.check_rows, replace=False).tolist():
            t0 = time.perf_counter()
            row = space.pairwise(np.array([q]), np.arange(n)).astype(np.float64)[0]
            row[q] = np.inf
            order = np.lexsort((np.arange(n), row))[:a.m]
            checks.append({"row": q, "same_indices": bool(np.array_equal(order, graph.nn_idx[q])),
                           "max_diff": float(np.abs(row[order] - graph.nn_dist[q]).max()),
                           "seconds": time.perf_counter() - t0})
        r = {"n": n, "seconds": wall, "per_image_ms": 1e3 * wall / n, "emd_solves": solves, "brute_solves": brute,
             "checks": checks}
        rows.append(r)
        ok = sum(c["same_indices"] for c in checks)
        print(f"N = {n:>6,}: {wall:8.1f} s wall ({a.workers} processes), {r['per_image_ms']:6.1f} ms per image; "
              f"{solves:>13,} exact WMDs of {brute:,} ({brute / solves:,.0f}x fewer); exact top-{a.m} in "
              f"{ok}/{len(checks)} checked rows (max |difference| "
              f"{max(c['max_diff'] for c in checks):.1e}; a brute-force row took "
              f"{np.mean([c['seconds'] for c in checks]):.1f} s)", flush=True)
    if len(rows) >= 2:
        lo, hi = rows[-2], rows[-1]
        slope = np.log(hi["per_image_ms"] / lo["per_image_ms"]) / np.log(hi["n"] / lo["n"])
        per_image = hi["per_image_ms"] * (COCO_TRAIN / hi["n"]) ** slope
        total = per_image * COCO_TRAIN / 1e3
        print(f"COCO ({COCO_TRAIN:,} images): time per image grows as N^{slope:.2f} between N = {lo['n']:,} and "
              f"{hi['n']:,}; continued to COCO: {per_image:.0f} ms per image, {total / 3600:.1f} h on {a.workers} "
              f"processes ({total * a.workers / 3600:.1f} core-h; {total * a.workers / 16 / 3600:.1f} h on 16)")
    if a.json:
        Path(a.json).write_text(json.dumps(rows, indent=1))


if __name__ == "__main__":
    main()
