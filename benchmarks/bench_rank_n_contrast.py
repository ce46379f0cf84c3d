"""Rank-N-Contrast loss + backward: our sorted form vs the authors' loop over positions.

``python benchmarks/bench_rank_n_contrast.py [--batch 64 150 512] [--dim 128] [--temperature 2] [--repeats 20]``.
The baseline is the authors' ``RnCLoss`` (Zha et al. 2023, loss.py), reimplemented from its formulation:
every sample an anchor, the L2 feature similarity of the [B, B, D] differences, the diagonal removed, then
one Python iteration per position k in 0..B-2 that masks the whole [B, B-1] matrix with
``label_diffs >= label_diffs[:, k]``: O(B^3). Ours (``embedder.losses.rank_n_contrast``) sorts each row once
and reads every denominator off one cumulative log-sum-exp: O(B^2 log B) for all anchors. Labels are
integers in 0..99 (ages in years, as the authors' AgeDB), so label distances tie; each row also prints how
far the two losses and their gradients lie apart. Medians (min) over alternating repeats, 2 threads.
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

from embedder.losses.rank_n_contrast import rank_n_contrast_loss  # noqa: E402


def authors_rnc_loss(emb: torch.Tensor, label_dist: torch.Tensor, temperature: float) -> torch.Tensor:
    """The authors' RnCLoss on one batch in which every sample is an anchor (label_dist [B, B])."""
    n = emb.shape[0]
    logits = -(emb[:, None, :] - emb[None, :, :]).norm(2, dim=-1) / temperature
    logits = logits - logits.max(dim=1, keepdim=True)[0].detach()
    exp_logits = logits.exp()
    off_diagonal = ~torch.eye(n, dtype=torch.bool, device=emb.device)
    logits = logits.masked_select(off_diagonal).view(n, n - 1)
    exp_logits = exp_logits.masked_select(off_diagonal).view(n, n - 1)
    label_diffs = label_dist.masked_select(off_diagonal).view(n, n - 1)
    loss = emb.new_zeros(())
    for k in range(n - 1):
        pos_logits = logits[:, k]
        neg_mask = (label_diffs >= label_diffs[:, k].view(-1, 1)).to(emb.dtype)
        pos_log_probs = pos_logits - torch.log((neg_mask * exp_logits).sum(dim=-1))
        loss = loss - (pos_log_probs / (n * (n - 1))).sum()
    return loss


def make_batch(batch: int, dim: int, seed: int = 0):
    """Embeddings, every position as an anchor, and L1 distances of integer labels (ties)."""
    g = torch.Generator().manual_seed(seed)
    emb = torch.randn(batch, dim, generator=g)
    labels = torch.randint(0, 100, (batch,), generator=g).float()
    return emb, torch.arange(batch), (labels[:, None] - labels[None, :]).abs()


def loss_and_grad(loss_fn, emb):
    x = emb.clone().requires_grad_(True)
    loss = loss_fn(x)
    loss.backward()
    return loss.detach(), x.grad


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--batch", type=int, nargs="+", default=[64, 150, 512])
    parser.add_argument("--dim", type=int, default=128)
    parser.add_argument("--temperature", type=float, default=2.0)
    parser.add_argument("--repeats", type=int, default=20)
    args = parser.parse_args()
    torch.set_num_threads(2)
    tau = args.temperature

    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_line()}, float32, forward + backward, "
          f"median (min) of {args.repeats} alternating runs; D={args.dim}, every sample an anchor, tau={tau:g}; "
          f"load average before start {os.getloadavg()[0]:.2f} (other jobs skew times)")
    print(f"{'B':>4} {'sorted (min)':>20} {'authors loop (min)':>22} {'authors/sorted':>15} "
          f"{'|d loss|':>9} {'max |d grad|':>13}")
    for batch in args.batch:
        emb, anchors, label_dist = make_batch(batch, args.dim)
        ours = lambda x: rank_n_contrast_loss(x, anchors, label_dist, temperature=tau)  # noqa: E731
        theirs = lambda x: authors_rnc_loss(x, label_dist, tau)  # noqa: E731
        (l_ours, g_ours), (l_theirs, g_theirs) = loss_and_grad(ours, emb), loss_and_grad(theirs, emb)
        (t_ours, m_ours), (t_theirs, m_theirs) = median_seconds(
            [lambda: loss_and_grad(ours, emb), lambda: loss_and_grad(theirs, emb)], args.repeats)
        sorted_ = f"{t_ours * 1e3:.3f}ms ({m_ours * 1e3:.3f})"
        loop = f"{t_theirs * 1e3:.3f}ms ({m_theirs * 1e3:.3f})"
        print(f"{batch:>4} {sorted_:>20} {loop:>22} {t_theirs / t_ours:>14.2f}x "
              f"{abs(float(l_ours - l_theirs)):>9.1e} {float((g_ours - g_theirs).abs().max()):>13.1e}")


if __name__ == "__main__":
    main()
