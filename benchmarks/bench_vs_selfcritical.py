"""Captioner training steps in self-critical.pytorch's benchmark setting, capaware's precisions side by side.

``python benchmarks/bench_vs_selfcritical.py [--steps 8] [--threads 2] [--modes float32 bfloat16 ...]``

The setting is the one of the side-by-side measurement in issue #16 (self-critical.pytorch's own
defaults): 200 synthetic images (160 train), 5 captions per image of 8-11 words over a 35-word
vocabulary, labels cut at 16 words; attention features 14 x 14 x 2048 and fc 2048 in float32 (random,
post-ReLU-like), held in memory (the data wait of that measurement was nil); dropout 0.5, Adam, clipping
by value 0.1. Steps:

* Att2all2 XE, batch 16 images x 5 captions, LSTM 512, attention 512;
* Top-Down XE, batch 32 x 5, LSTMs 1024, attention 512;
* Att2all2 SCST from XE weights (trained here first, ``--xe-epochs``, float32), batch 16 images x 5
  samples of at most 20 words plus the greedy baseline, CIDEr-D reward with the training set's document
  frequencies (rl.cider), mixed objective off.

Each step is the code the trainers run (captioners/xe.py and rl/scst.py: model forward under the
precision's autocast, loss in float32, backward, clip, Adam); a mode is a ``train.precision`` and
``train.compile`` pair. Times are medians (min) over ``--steps`` steps on successive batches after the
warm-up steps (which include torch.compile's compilation, reported on its own). The loss check runs
every mode on the same weights and batch with dropout off and prints its loss relative to float32.
The self-critical.pytorch column is that measurement's figure for the same step on the same kind of
2-core machine (it cannot be rerun here: the toolkit is not on PyPI and this machine has no internet).
"""
from __future__ import annotations

import argparse
import copy
import os
import shlex
import statistics
import sys
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from capcore.device import autocast  # noqa: E402
from captioners.model import Captioner, xe_loss  # noqa: E402
from captioners.prepro import Labels  # noqa: E402
from captioners.speed import apply_compile  # noqa: E402
from rl.cider import CiderReward, build_doc_freq  # noqa: E402
from rl.scst_loss import baseline, greedy_captions, sample_captions, scst_loss  # noqa: E402

# issue #16's side-by-side table (self-critical.pytorch on the 2-core machine, 2 threads), seconds per step
SELF_CRITICAL_S = {"att2all2_xe": (0.71, 0.92), "topdown_xe": (6.08, 6.08), "att2all2_scst": (1.38, 1.38)}
MODES = {"float32": (None, False), "float32+compile": (None, True), "bfloat16": (torch.bfloat16, False),
         "bfloat16+compile": (torch.bfloat16, True)}
STEPS = {  # name: (core, images per batch, rnn size)
    "att2all2_xe": ("att2all2", 16, 512), "topdown_xe": ("topdown", 32, 1024), "att2all2_scst": ("att2all2", 16, 512)}
VOCAB, IMAGES, TRAIN, CAPS, MAX_LEN, SAMPLE_LEN = 35, 200, 160, 5, 16, 20


def synthetic_set(seed: int = 0):
    """Features, [N, 5, 16] captions of 8-11 random words, and the same captions as a Labels table."""
    g = torch.Generator().manual_seed(seed)
    att = torch.rand(IMAGES, 196, 2048, generator=g)
    fc = att.mean(1)
    seq = torch.randint(1, VOCAB + 1, (IMAGES, CAPS, MAX_LEN), generator=g)
    lengths = torch.randint(8, 12, (IMAGES, CAPS, 1), generator=g)
    seq = seq * (torch.arange(MAX_LEN) < lengths)
    flat = seq.reshape(-1, MAX_LEN).numpy().astype(np.int32)
    starts = np.arange(IMAGES) * CAPS
    splits = np.array(["train"] * TRAIN + ["val"] * (IMAGES - TRAIN))
    labels = Labels(flat, (flat > 0).sum(1), starts, starts + CAPS, np.arange(IMAGES, dtype=np.int64), splits,
                    MAX_LEN, Path("<synthetic>"))
    return fc, att, seq, labels


def batches(images: int):
    """Successive training batches (image indices), wrapping around the 160 training images."""
    i = 0
    while True:
        yield np.arange(i, i + images) % TRAIN
        i = (i + images) % TRAIN


def xe_step(model, opt, fc, att, seq, dtype):
    model.train()
    with autocast(torch.device("cpu"), dtype):
        logp = model(fc, att, seq)
    loss = xe_loss(logp.float(), seq.view(-1, seq.size(-1)))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)
    opt.step()
    return loss.item()


def make_scst_step(reward, gen):
    def scst_step(model, opt, fc, att, ix, dtype, lengths: list):
        model.train()
        with autocast(torch.device("cpu"), dtype):
            greedy = greedy_captions(model, fc, att, SAMPLE_LEN)
            dec = sample_captions(model, fc, att, CAPS, SAMPLE_LEN, 1.0, gen)
        greedy_r = reward(greedy, ix)
        r = reward(dec.seq, np.repeat(ix, CAPS)).reshape(len(ix), CAPS)
        loss = scst_loss(dec.logprob.float(), r, baseline("greedy", r, greedy_r))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()
        lengths.append(float((dec.seq > 0).sum(1).float().mean()))
        return loss.item()
    return scst_step


def build(core: str, rnn: int, seed: int = 0) -> Captioner:
    torch.manual_seed(seed)
    return Captioner(core, VOCAB, 2048, 2048, 512, rnn, 512, 0.5)


def loss_check(model: Captioner, mode: str, fc, att, seq) -> float:
    """XE loss of ``model`` under ``mode`` with dropout off, on one fixed batch."""
    dtype, compiled = MODES[mode]
    m = copy.deepcopy(model).eval()
    if compiled:
        apply_compile(m)
    with torch.no_grad(), autocast(torch.device("cpu"), dtype):
        logp = m(fc, att, seq)
    return xe_loss(logp.float(), seq.view(-1, seq.size(-1))).item()


def time_mode(name: str, mode: str, data, xe_weights, reward, a) -> dict:
    fc, att, seq, _ = data
    core, images, rnn = STEPS[name]
    dtype, compiled = MODES[mode]
    model = build(core, rnn)
    if xe_weights is not None:
        model.load_state_dict(xe_weights)
    if compiled:
        apply_compile(model)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    gen = torch.Generator().manual_seed(0)
    step = make_scst_step(reward, gen) if name.endswith("scst") else None
    lengths: list[float] = []
    times = []
    it = batches(images)
    for k in range(a.warmup + a.steps):
        ix = next(it)
        start = time.perf_counter()
        if step is None:
            xe_step(model, opt, fc[ix], att[ix], seq[ix], dtype)
        else:
            step(model, opt, fc[ix], att[ix], ix, dtype, lengths)
        times.append(time.perf_counter() - start)
    timed = times[a.warmup:]
    return {"median": statistics.median(timed), "min": min(timed), "warmup": sum(times[:a.warmup]),
            "sample_len": float(np.mean(lengths[a.warmup:])) if lengths else None}


def train_xe(data, epochs: int) -> dict:
    """Att2all2 XE weights for the SCST step (float32, as a user's XE run would give them)."""
    fc, att, seq, _ = data
    model = build("att2all2", 512)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    it = batches(16)
    for _ in range(epochs * TRAIN // 16):
        ix = next(it)
        xe_step(model, opt, fc[ix], att[ix], seq[ix], None)
    return model.state_dict()


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--steps", type=int, default=8, help="timed steps per mode (successive batches)")
    parser.add_argument("--warmup", type=int, default=2, help="untimed first steps (compilation happens here)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--xe-epochs", type=int, default=6, help="XE epochs behind the SCST step's weights")
    parser.add_argument("--modes", nargs="+", default=list(MODES), choices=list(MODES))
    parser.add_argument("--only", nargs="+", default=list(STEPS), choices=list(STEPS))
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    data = synthetic_set()
    fc, att, seq, labels = data
    reward = CiderReward(labels, build_doc_freq(labels, VOCAB + 1))
    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, {torch.get_num_threads()} threads, {cpu_line()}"
          f", load average before start {os.getloadavg()[0]:.2f} (other jobs skew times)")
    print(f"{'step':>14} {'mode':>17} {'s/step (min)':>14} {'warm-up s':>9} {'loss vs fp32':>12} "
          f"{'self-critical s':>15} {'ratio':>11}")
    for name in a.only:
        core, images, rnn = STEPS[name]
        xe_weights = train_xe(data, a.xe_epochs) if name.endswith("scst") else None
        check = build(core, rnn)
        if xe_weights is not None:
            check.load_state_dict(xe_weights)
        ix = np.arange(images)
        ref = loss_check(check, "float32", fc[ix], att[ix], seq[ix])
        for mode in a.modes:
            r = time_mode(name, mode, data, xe_weights, reward, a)
            rel = loss_check(check, mode, fc[ix], att[ix], seq[ix]) / ref - 1
            lo, hi = SELF_CRITICAL_S[name]
            sc = f"{lo:.2f}" if lo == hi else f"{lo:.2f}-{hi:.2f}"
            ratio = f"{lo / r['median']:.2f}x" if lo == hi else f"{lo / r['median']:.2f}-{hi / r['median']:.2f}x"
            extra = f"  (samples {r['sample_len']:.1f} words)" if r["sample_len"] is not None else ""
            print(f"{name:>14} {mode:>17} {r['median']:>6.3f} ({r['min']:.3f}) {r['warmup']:>9.1f} {rel:>+12.1e} "
                  f"{sc:>15} {ratio:>11}{extra}", flush=True)


if __name__ == "__main__":
    main()
