"""Dense log-ratio loss + backward: our closed form vs the [A, B, B] broadcast vs a per-triplet loop.

``python benchmarks/bench_log_ratio.py [--batch 150] [--dim 128] [--anchors 1 8] [--repeats 20]
[--ref-triplets 2000]``. The per-triplet Python loop (``log_ratio_loss_per_triplet``) is timed on
the first ``--ref-triplets`` dense triplets and scaled linearly to all of them (its cost is one
autograd graph node group per triplet); the output says so. Medians over repeats, 2 threads.
"""
from __future__ import annotations

import argparse
import os
import platform
import shlex
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from timing import median_seconds  # noqa: E402

from embedder.losses.log_ratio import log_ratio_loss, log_ratio_loss_per_triplet  # noqa: E402
from embedder.mining import dense_triplet_mask, triplets_from_mask  # noqa: E402


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
    parser.add_argument("--repeats", type=int, default=20)
    parser.add_argument("--ref-triplets", type=int, default=2000)
    parser.add_argument("--ref-repeats", type=int, default=3)
    args = parser.parse_args()
    torch.set_num_threads(2)

    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {platform.processor() or platform.machine()}, "
          f"float32, forward + backward, median (min) of {args.repeats} alternating runs (reference: {args.ref_repeats})")
    print(f"# B={args.batch} D={args.dim}; per-triplet reference timed on its first 'ref on' triplets and "
          f"scaled linearly to all; load average before start {os.getloadavg()[0]:.2f} (other jobs skew times)")
    header = (f"{'A':>3} {'triplets':>9} {'ref on':>7} {'closed form (min)':>20} {'broadcast (min)':>20} "
              f"{'per-triplet':>11} {'ref/closed':>10} {'ref/bcast':>9} {'bcast/closed':>12}")
    print(header)
    # Throwaway run of every path: the first sort/searchsorted/autograd calls of a process pay
    # one-off set-up that would otherwise land in whichever row is timed first.
    emb, anchors, label_dist = make_batch(args.batch, args.dim, max(args.anchors), seed=1)
    for _ in range(5):
        step(lambda x: log_ratio_loss(x, anchors, label_dist), emb)
        step(lambda x: log_ratio_loss(x, anchors, label_dist, mask=dense_triplet_mask(anchors, label_dist)), emb)
    for n_anchors in args.anchors:
        emb, anchors, label_dist = make_batch(args.batch, args.dim, n_anchors)
        mask = dense_triplet_mask(anchors, label_dist)
        n_trip = int(mask.sum())

        (t_closed, m_closed), (t_bcast, m_bcast) = median_seconds([
            lambda: step(lambda x: log_ratio_loss(x, anchors, label_dist), emb),
            lambda: step(lambda x: log_ratio_loss(
                x, anchors, label_dist, mask=dense_triplet_mask(anchors, label_dist)), emb),
        ], args.repeats)

        a, i, j = triplets_from_mask(mask)
        n_sub = min(args.ref_triplets, n_trip)
        sub = torch.zeros_like(mask)
        sub[a[:n_sub], i[:n_sub], j[:n_sub]] = True
        ((t_sub, _),) = median_seconds([lambda: step(lambda x: log_ratio_loss_per_triplet(
            x, anchors, label_dist, mask=sub), emb)], args.ref_repeats, warmup=1)
        t_ref = t_sub * n_trip / n_sub
        closed = f"{t_closed * 1e3:.3f}ms ({m_closed * 1e3:.3f})"
        bcast = f"{t_bcast * 1e3:.3f}ms ({m_bcast * 1e3:.3f})"
        print(f"{n_anchors:>3} {n_trip:>9} {n_sub:>7} {closed:>20} {bcast:>20} {t_ref:>10.2f}s "
              f"{t_ref / t_closed:>9.0f}x {t_ref / t_bcast:>8.0f}x {t_bcast / t_closed:>11.2f}x")


if __name__ == "__main__":
    main()
