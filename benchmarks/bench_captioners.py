"""Captioner speed and memory at the paper's sizes on CPU: XE training steps/s, peak RSS, decoding images/s.

``python benchmarks/bench_captioners.py [--steps 3] [--threads 2] [--decode-images 32] [--vocab 9487]``
``python benchmarks/bench_captioners.py --demo-sizes --regions 16 --channels 512 --vocab 60 --threads 1``
(the demo's models on its 4 x 4 grid of 512 channels, one thread each, as make demo runs them)

Models are built from ``configs/paper/coco_att2all2.yaml`` (batch 16, LSTM 512), ``configs/paper/coco_topdown.yaml``
(batch 32, LSTMs 1024) and ``configs/paper/coco_transformer.yaml`` (batch 10, 6 + 6 layers of width 512), on random
ResNet-101-shaped features (196 regions x 2048, fc 2048) held in memory, so the numbers are the model's own (no
HDF5 reads). Captions: 5 per image, random words, 8-16 long (COCO's mean is ~10); the vocabulary is Karpathy COCO's
at threshold 5 (9,487 words).
Training step = teacher-forced forward + masked XE + backward + gradient clamp + Adam, dropout on;
median (min) of ``--steps`` steps after one warm-up step. Each model runs in its own process, so
its peak RSS (after training) is its own; "model+batch" is the RSS before the first step.
Decoding (random weights never say EOS, so every caption runs the full 16 words: an upper bound):
greedy and beam 2 over ``--decode-images`` images in one batch. This benchmark measures capacity at
the paper's sizes; the comparison with a peer toolkit is benchmarks/bench_vs_selfcritical.py.
"""
from __future__ import annotations

import argparse
import json
import os
import resource
import shlex
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

from capcore.cpu_isa import cpu_line  # noqa: E402
from captioners.config import load_captioner_config  # noqa: E402
from captioners.core_registry import core_args  # noqa: E402
from captioners.decoding import beam_search, greedy  # noqa: E402
from captioners.model import Captioner, xe_loss  # noqa: E402

MODELS = {"att2all2": "configs/paper/coco_att2all2.yaml", "topdown": "configs/paper/coco_topdown.yaml",
          "transformer": "configs/paper/coco_transformer.yaml"}


def rss_mib() -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return float("nan")


def peak_rss_mib() -> float:
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024  # KiB on Linux


def random_batch(batch: int, k: int, regions: int, channels: int, vocab: int, max_len: int, g: torch.Generator):
    att = torch.rand(batch, regions, channels, generator=g)  # post-ReLU-like, non-negative
    fc = att.mean(1)
    seq = torch.randint(1, vocab + 1, (batch, k, max_len), generator=g)
    lengths = torch.randint(8, max_len + 1, (batch, k, 1), generator=g)
    seq = seq * (torch.arange(max_len).view(1, 1, -1) < lengths)
    return fc, att, seq


def timed(fn, repeats: int) -> tuple[float, float]:
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return statistics.median(times), min(times)


def run_one(core: str, a) -> dict:
    """One model in this process: training speed, peak memory, decoding speed."""
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    cfg = load_captioner_config(ROOT / (f"configs/demo/demo_{core}.yaml" if a.demo_sizes else MODELS[core]))
    m, t = cfg.model, cfg.train
    model = Captioner(core, a.vocab, a.channels, a.channels, m.input_encoding_size, m.rnn_size, m.att_hid_size,
                      m.drop_prob_lm, core_args=core_args(m))
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.eps)
    g = torch.Generator().manual_seed(0)
    fc, att, seq = random_batch(t.batch_size, cfg.data.seq_per_img, a.regions, a.channels, a.vocab, a.max_len, g)
    base = rss_mib()

    def train_step():
        model.train()
        loss = xe_loss(model(fc, att, seq), seq.view(-1, a.max_len))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), t.grad_clip)
        opt.step()

    train_step()  # warm-up: first-call allocations and Adam state
    step_s, step_min = timed(train_step, a.steps)
    peak = peak_rss_mib()

    model.eval()
    dfc, datt, _ = random_batch(a.decode_images, 1, a.regions, a.channels, a.vocab, a.max_len, g)
    greedy(model, dfc[:2], datt[:2], a.max_len)  # warm-up
    greedy_s, _ = timed(lambda: greedy(model, dfc, datt, a.max_len), 2)
    beam_s, _ = timed(lambda: beam_search(model, dfc, datt, 2, a.max_len), 2)
    return {"core": core, "batch": t.batch_size, "rnn": m.rnn_size, "params_m": sum(p.numel() for p in
            model.parameters()) / 1e6, "step_s": step_s, "step_min": step_min, "base_mib": base, "peak_mib": peak,
            "greedy_ips": a.decode_images / greedy_s, "beam_ips": a.decode_images / beam_s}


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=3, help="timed training steps per model (after 1 warm-up)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--decode-images", type=int, default=32)
    parser.add_argument("--vocab", type=int, default=9487, help="words (Karpathy COCO, threshold 5: 9487)")
    parser.add_argument("--regions", type=int, default=196, help="H*W of the att grid (14 x 14)")
    parser.add_argument("--channels", type=int, default=2048)
    parser.add_argument("--max-len", type=int, default=16)
    parser.add_argument("--models", nargs="+", default=list(MODELS), choices=list(MODELS))
    parser.add_argument("--demo-sizes", action="store_true",
                        help="build each model from configs/demo/demo_<core>.yaml instead (pair with --regions 16 "
                             "--channels 512, the demo's grid)")
    parser.add_argument("--only", default=None, help=argparse.SUPPRESS)  # child process: one model, JSON out
    a = parser.parse_args()
    if a.only:
        print(json.dumps(run_one(a.only, a)))
        return

    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, {a.threads} threads, {cpu_line()}, "
          f"float32 CPU; features {a.regions} x {a.channels} (random), vocab {a.vocab}, {a.max_len} words; "
          f"load average before start {os.getloadavg()[0]:.2f} (other jobs skew times)")
    print(f"{'model':>11} {'batch':>5} {'rnn':>5} {'params':>7} {'step s (min)':>14} {'steps/s':>8} {'img/s':>6} "
          f"{'model+batch':>11} {'peak RSS':>9} {'greedy img/s':>12} {'beam2 img/s':>11}")
    for core in a.models:
        proc = subprocess.run([sys.executable, __file__, *sys.argv[1:], "--only", core], capture_output=True, text=True,
                              env=dict(os.environ, OMP_NUM_THREADS=str(a.threads)))
        if proc.returncode != 0:
            sys.exit(f"{core}: benchmark child failed: {proc.stderr.strip()[-500:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        print(f"{core:>11} {r['batch']:>5} {r['rnn']:>5} {r['params_m']:>6.1f}M "
              f"{r['step_s']:>6.3f} ({r['step_min']:>5.3f}) {1 / r['step_s']:>8.3f} {r['batch'] / r['step_s']:>6.1f} "
              f"{r['base_mib']:>8.0f}MiB {r['peak_mib']:>6.0f}MiB {r['greedy_ips']:>12.1f} {r['beam_ips']:>11.1f}")


if __name__ == "__main__":
    main()
