"""Captioner steps by precision on CPU: why ``precision: auto`` keeps the captioners at float32 on every CPU.

``python benchmarks/bench_captioner_precision.py [--threads 1] [--repeats 10]``

The demo's captioners (``configs/demo/demo_<core>.yaml``: batch, LSTM sizes) on its 4 x 4 grid of 512 channels
and a 60-word vocabulary, one thread each as ``make demo`` runs them, random features and captions
(``bench_captioners.random_batch``). Two steps per core, each under bfloat16 autocast and in float32, timed in
alternation (median, min of ``--repeats``):
- XE: teacher-forced forward, masked cross-entropy, backward, Adam (captioners/xe.py);
- SCST: 5 samples per image at temperature 0.5 with autograd on (``captioners.decoding.sample_loop``, as
  rl/scst_loss.py draws them), a REINFORCE loss on their log-probabilities, backward, Adam.
On a CPU without native bfloat16 the autocast column is emulated (an order of magnitude slower); the question
this answers is whether native bfloat16 (AVX-512 BF16, AMX) pays for these small recurrent steps.
``capcore.device.precision_choice(..., auto_on_cpu=False)`` follows its numbers.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parent))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from bench_captioners import random_batch  # noqa: E402
from timing import median_seconds  # noqa: E402

from capcore.cpu_isa import cpu_line  # noqa: E402
from capcore.device import autocast  # noqa: E402
from captioners.config import load_captioner_config  # noqa: E402
from captioners.core_registry import core_args  # noqa: E402
from captioners.decoding import sample_loop  # noqa: E402
from captioners.model import Captioner, xe_loss  # noqa: E402

ROOT = Path(__file__).resolve().parents[1]
CPU = torch.device("cpu")


def steps(core: str, a) -> tuple:
    """The XE and SCST step functions of one demo captioner, each taking the autocast dtype (None: float32)."""
    cfg = load_captioner_config(ROOT / f"configs/demo/demo_{core}.yaml")
    m, t = cfg.model, cfg.train
    model = Captioner(core, a.vocab, a.channels, a.channels, m.input_encoding_size, m.rnn_size, m.att_hid_size,
                      m.drop_prob_lm, core_args=core_args(m))
    opt = torch.optim.Adam(model.parameters(), lr=t.lr)
    g = torch.Generator().manual_seed(0)
    fc, att, seq = random_batch(t.batch_size, cfg.data.seq_per_img, a.regions, a.channels, a.vocab, a.max_len, g)

    def xe(dtype):
        with autocast(CPU, dtype):
            loss = xe_loss(model(fc, att, seq), seq.view(-1, a.max_len))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    def scst(dtype):
        with autocast(CPU, dtype):
            out = sample_loop(model, fc, att, a.max_len, temperature=0.5, generator=g, repeat=5)
        advantage = torch.randn(out.logprob.shape, generator=g)
        opt.zero_grad(set_to_none=True)
        (-(advantage * out.logprob.float()).mean()).backward()
        opt.step()

    return xe, scst


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--repeats", type=int, default=10)
    parser.add_argument("--vocab", type=int, default=60)
    parser.add_argument("--regions", type=int, default=16)
    parser.add_argument("--channels", type=int, default=512)
    parser.add_argument("--max-len", type=int, default=16)
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    torch.manual_seed(0)
    print(f"# torch {torch.__version__}, {a.threads} thread(s), {cpu_line()}; features {a.regions} x {a.channels}, "
          f"vocab {a.vocab}; median (min) of {a.repeats} steps, the two precisions in alternation")
    print(f"{'step':>15} {'bfloat16 autocast s':>20} {'float32 s':>16} {'float32 speed-up':>17}")
    for core in ("att2all2", "topdown"):
        for name, fn in zip(("XE", "SCST"), steps(core, a)):
            (bf, bf_min), (fp, fp_min) = median_seconds([lambda: fn(torch.bfloat16), lambda: fn(None)], a.repeats)
            print(f"{core + ' ' + name:>15} {bf:>12.4f} ({bf_min:.4f}) {fp:>8.4f} ({fp_min:.4f}) {bf / fp:>16.2f}x")


if __name__ == "__main__":
    main()
