"""Dense log-ratio loss + backward: our closed form vs the vectorised all-pairs [A, B, B] form.

``python benchmarks/bench_log_ratio.py [--batch 150] [--dim 128] [--anchors 1 8] [--repeats 60]``.
The baseline is what a user writes without capaware: every (anchor, i, j) term of the dense triplets
at once as an [A, B, B] tensor, masked (``log_ratio_loss(..., mask=dense_triplet_mask(...))``); a
Python loop over triplets is no baseline anyone runs (the tests use it as the reference of the
values). Medians (min) over alternating repeats, 2 threads.
"""
from __future__ import annotations

import argparse
import os
import shlex
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from timing import median_seconds  # noqa: E402

from embedder.losses.log_ratio import log_ratio_loss  # noqa: E402
from embedder.mining import dense_triplet_mask  # noqa: E402


def make_batch(batch: int, dim: int, n_anchors: int, seed: int = 0):
    """Embeddings and label distances from random 8-D labels (distinct distances, like real ones)."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(batch, dim, generator=g)
    labels = torch.randn(batch, 8, generator=g)
    anchors = torch.randperm(batch, generator=g)[:n_anchors]
    label_dist = (labels[None] - labels[anchors][:, None]).norm(dim=-1)
    return emb, anchors, label_dist


def step(loss_fn, emb):
    x = emb.clone().requires_grad_(True)
    loss_fn(x).backward()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, default=150)
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--anchors", type=int, nargs="+", default=[1, 8])
    parser.add_argument("--repeats", type=int, default=60)
    args = parser.parse_args()
    torch.set_num_threads(2)

    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_line()}, "
          f"float32, forward + backward, median (min) of {args.repeats} alternating runs; B={args.batch} "
          f"D={args.dim}; load average before start {os.getloadavg()[0]:.2f} (other jobs skew times)")
    print(f"{'A':>3} {'triplets':>9} {'closed form (min)':>20} "
          f"{'all-pairs [A,B,B] (min)':>24} {'all-pairs/closed':>17}")
    # Throwaway run of every path: the first sort/searchsorted/autograd calls of a process pay
    # one-off set-up that would otherwise land in whichever row is timed first.
    emb, anchors, label_dist = make_batch(args.batch, args.dim, max(args.anchors), seed=1)
    for _ in range(5):
        step(lambda x: log_ratio_loss(x, anchors, label_dist), emb)
        step(lambda x: log_ratio_loss(x, anchors, label_dist, mask=dense_triplet_mask(anchors, label_dist)), emb)
    for n_anchors in args.anchors:
        emb, anchors, label_dist = make_batch(args.batch, args.dim, n_anchors)
        n_trip = int(dense_triplet_mask(anchors, label_dist).sum())
        (t_closed, m_closed), (t_bcast, m_bcast) = median_seconds([
            lambda: step(lambda x: log_ratio_loss(x, anchors, label_dist), emb),
            lambda: step(lambda x: log_ratio_loss(
                x, anchors, label_dist, mask=dense_triplet_mask(anchors, label_dist)), emb),
        ], args.repeats)
        closed = f"{t_closed * 1e3:.3f}ms ({m_closed * 1e3:.3f})"
        bcast = f"{t_bcast * 1e3:.3f}ms ({m_bcast * 1e3:.3f})"
        print(f"{n_anchors:>3} {n_trip:>9} {closed:>20} {bcast:>24} {t_bcast / t_closed:>16.2f}x")


if __name__ == "__main__":
    main()
