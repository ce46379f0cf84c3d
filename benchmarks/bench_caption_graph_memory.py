"""Peak memory of one caption-graph worker process against the number of training images, and the line
``embedder.labels.graph_memory`` caps ``graph.workers`` with.

``python benchmarks/bench_caption_graph_memory.py [--sizes 2500 5000 10000 20000] [--vocab 12000] [--dim 300]
[--reuse FILE] [--cited N BYTES SOURCE] [--json FILE]``

Captions as in bench_caption_graph_scale.py (a Zipf vocabulary the size of COCO's, 5 captions an image,
300-D word2vec). Per size N, ``build_caption_graph`` runs its first chunks in 2 spawned worker processes
(each worker gets the whole pickled space, builds its searcher and solves 2 chunks of 512 queries, so its
WMD memos fill as they would in a long build), and the peak resident memory of those workers is read
from ``getrusage(RUSAGE_CHILDREN)`` once they have exited. Sizes run in increasing order, since that
figure is the largest over every child so far. The worker's memory grows linearly with N (its copy of
the centroids, nBOW rows and the [64, N] bound rows), a little faster at large N, where more of the
vocabulary is in use. ``--cited`` adds a peak measured elsewhere (issue #47's review measured 2.71 GB at
COCO's 113,287 images), named by its source, to the least-squares line; ``--reuse`` takes the measured rows
of an earlier run's JSON instead of measuring again.
"""
from __future__ import annotations

import argparse
import json
import platform
import resource
import shlex
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))

from bench_caption_graph_scale import COCO_TRAIN, zipf_captions  # noqa: E402
from capcore.cpu_isa import cpu_line  # noqa: E402
from embedder.labels.caption_graph import build_caption_graph  # noqa: E402
from embedder.labels.caption_space import CaptionSpace  # noqa: E402
from embedder.labels.wordvecs import tokenize, train_word2vec  # noqa: E402


def children_peak_bytes() -> int:
    """Largest resident set of any exited child so far (Linux reports kilobytes)."""
    return resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss * 1024


def measured(a, sizes: list[int]) -> list[dict]:
    """One worker's peak at each size, smallest first (the children's peak only grows)."""
    captions = zipf_captions(max(sizes), a.vocab, 0)
    kv = train_word2vec([tokenize(s) for caps in captions for s in caps], dim=a.dim, seed=0, epochs=5)
    rows = []
    for n in sizes:
        space = CaptionSpace(captions[:n], kv)
        chunks = range(min(4, -(-n // a.chunk)))
        build_caption_graph(space, m=30, workers=2, chunk=a.chunk, progress=False, _chunks=chunks)
        rows.append({"n": n, "vocab_used": len(space.prep.words), "worker_peak_bytes": children_peak_bytes()})
    return rows


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--sizes", type=int, nargs="+", default=[2500, 5000, 10000, 20000])
    ap.add_argument("--vocab", type=int, default=12000)
    ap.add_argument("--dim", type=int, default=300)
    ap.add_argument("--chunk", type=int, default=512)
    ap.add_argument("--reuse", default=None, help="the measured rows of an earlier --json file")
    ap.add_argument("--cited", nargs=3, action="append", default=[], metavar=("N", "BYTES", "SOURCE"),
                    help="a worker peak measured elsewhere, added to the fit with its source")
    ap.add_argument("--json", default=None)
    a = ap.parse_args()
    sizes = sorted(a.sizes)
    print("$ python " + " ".join(shlex.quote(x) for x in sys.argv))
    print(f"{cpu_line()}; python {platform.python_version()}, numpy {np.__version__}")
    rows = measured(a, sizes) if a.reuse is None else json.loads(Path(a.reuse).read_text())["measured"]
    for r in rows:
        print(f"N = {r['n']:>6,}: {r['vocab_used']:,} words used, one worker's peak "
              f"{r['worker_peak_bytes'] / 1e9:.3f} GB"
              + (f" (measured by {a.reuse}'s run)" if a.reuse else ""), flush=True)
    if any(b["worker_peak_bytes"] <= a_["worker_peak_bytes"] for a_, b in zip(rows, rows[1:])):
        print("note: the peak did not grow with N between two sizes; the fit below is an upper envelope")
    cited = [{"n": int(n), "worker_peak_bytes": int(float(b)), "source": src} for n, b, src in a.cited]
    for r in cited:
        print(f"N = {r['n']:>6,}: one worker's peak {r['worker_peak_bytes'] / 1e9:.3f} GB, cited: {r['source']}")
    n = np.array([r["n"] for r in rows + cited], float)
    peak = np.array([r["worker_peak_bytes"] for r in rows + cited], float)
    per_image, base = np.polyfit(n, peak, 1)
    worst = max(abs(base + per_image * x - y) / y for x, y in zip(n, peak))
    fit = {"base_bytes": float(base), "bytes_per_image": float(per_image),
           "cpu": json.loads(Path(a.reuse).read_text())["cpu"] if a.reuse else cpu_line(),
           "command": "python benchmarks/bench_caption_graph_memory.py " + shlex.join(sys.argv[1:]),
           "measured": rows, "cited": cited}
    print(f"line through {len(n)} points: {base / 1e9:.3f} GB + {per_image / 1e3:.2f} kB per image (largest miss "
          f"{100 * worst:.0f}%); at COCO's {COCO_TRAIN:,} images: "
          f"{(base + per_image * COCO_TRAIN) / 1e9:.2f} GB a worker")
    if a.json:
        Path(a.json).write_text(json.dumps(fit, indent=1) + "\n")


if __name__ == "__main__":
    main()
