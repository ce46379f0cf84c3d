"""Timed probes for ``capaware plan``: what one step of each kind of work costs on *this* machine.

Each probe builds the real model at the config's sizes, runs one warm-up step and times the next ones,
on random inputs (the cost of a step does not depend on the values). A CPU probe of a large batch runs a
few images and scales per image, since a CPU's time grows linearly with the batch at these sizes; a GPU
probe runs the whole batch, where small batches would understate its throughput. Every probe is
memoised by its arguments, so a pipeline of many configs of one shape probes once. Each probe says on stderr
what it times and, when done, how long it took: at paper sizes on a CPU, planning takes minutes.
"""
from __future__ import annotations

import functools
import statistics
import sys
import time

import torch

CPU_PROBE_IMAGES = (8, 16)
"""Images of the two timed CPU steps of a large stage-one or feature batch: its step's time is the line through
them, continued to the config's batch (a fixed part, the optimiser's update and the layers' launches, plus a
part per image)."""
WHOLE_BATCH_SECONDS = 2.0
"""A CPU batch whose step would take less than this is timed whole (small images, small trunks)."""


def _announced(describe):
    """A probe that says on stderr what it times before it starts, and how long it took (progress for a plan
    whose probes take minutes); under ``functools.lru_cache``, so a memoised answer says nothing."""
    def wrap(fn):
        @functools.wraps(fn)
        def probe(*args, **kwargs):
            print(f"capaware plan: timing {describe(*args, **kwargs)}", file=sys.stderr, flush=True)
            t0 = time.perf_counter()
            out = fn(*args, **kwargs)
            print(f"capaware plan:   done in {time.perf_counter() - t0:.0f} s", file=sys.stderr, flush=True)
            return out
        return probe
    return wrap


def _timed(step, repeats: int = 5) -> float:
    """The median of ``repeats`` timed calls after two warm-ups (first-call allocations, the optimiser's
    state, oneDNN's kernels): a busy core slows some calls, rarely the median. A step slower than a second
    (paper sizes on a CPU) is the median of three calls after one warm-up: one call alone, as before, let a
    single slow call set the estimate, and two plans of one config on one machine differed by 2-4x (issue #58)."""
    if _seconds(step) > 1.0:
        return statistics.median(_seconds(step) for _ in range(3))
    step()
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        step()
        times.append(time.perf_counter() - t0)
    return statistics.median(times)


@functools.lru_cache(maxsize=None)
@_announced(lambda arch, batch, size, train, precision, device, *rest, **kw:
            f"one {arch} {'training' if train else 'forward'} step of {batch} images at {size} px ({device})")
def trunk_seconds(arch: str, batch: int, size: int, train: bool, precision: str, device: str,
                  freeze: str = "none", threads: int = 1) -> float:
    """Seconds of one step of a stage-one trunk on ``batch`` images of ``size`` px: forward, backward and an
    SGD update of what ``freeze`` leaves trainable, on maps its frozen prefix computed once (``train``), or a
    whole forward alone (feature dumps, retrieval embeddings). On a GPU, and for a cheap CPU step, the whole
    batch is timed; for a costly CPU step two small batches, and the line through them gives the batch's time."""
    from capcore.device import autocast, pick_precision
    from embedder.model import build_model

    torch.set_num_threads(threads)
    dev = torch.device(device)
    dtype = pick_precision(precision, dev)
    model = build_model(arch, 128).to(dev).to(memory_format=torch.channels_last)
    prefix, rest = model.split_trunk(freeze if train else "none")
    rest = torch.nn.Sequential(rest, model.head)
    model.train(train)
    opt = torch.optim.SGD(rest.parameters(), lr=1e-3, momentum=0.9)

    def seconds(n: int) -> float:
        x = torch.randn(n, 3, size, size, device=dev).contiguous(memory_format=torch.channels_last)
        with torch.no_grad(), autocast(dev, dtype):
            x = prefix(x).float()  # the frozen maps, computed once per image (not per step)

        def step():
            with autocast(dev, dtype), torch.set_grad_enabled(train):
                out = rest(x)
            if train:
                out.float().pow(2).mean().backward()
                opt.step()
                opt.zero_grad(set_to_none=True)
            if dev.type == "cuda":
                torch.cuda.synchronize()
        return _timed(step)

    n1, n2 = CPU_PROBE_IMAGES
    if dev.type == "cuda" or batch <= n2:
        return seconds(batch)
    t2 = seconds(n2)
    if t2 * batch / n2 <= WHOLE_BATCH_SECONDS:  # cheap enough to time as it is: no extrapolation at all
        return seconds(batch)
    t1 = seconds(n1)
    return max(t1 + (batch - n1) * (t2 - t1) / (n2 - n1), t2)


@functools.lru_cache(maxsize=None)
@_announced(lambda sizes, vocab, batch, *rest, **kw: f"one joint-space step of {batch} pairs")
def joint_seconds(sizes: tuple, vocab: int, batch: int, max_len: int, device: str = "cpu", threads: int = 1) -> float:
    """Seconds of one joint-space training step (joint/train.py: both encoders, VSE0's hinges, backward, Adam)
    on random features and full-length captions. ``sizes``: (feature width, space width, word width, GRU layers)."""
    from capcore.optim import adam
    from joint.losses.vse import VSE0
    from joint.model import JointSpace

    channels, embed, word, layers = sizes
    torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = JointSpace(vocab, channels, embed, word, "fc", layers).to(dev)
    opt, loss = adam(model.parameters(), fused=False, lr=1e-4), VSE0()
    feats = torch.rand(batch, channels, device=dev)
    ids = torch.randint(1, vocab + 1, (batch, max_len), device=dev)

    def step():
        value = loss(*model(feats, ids))
        opt.zero_grad(set_to_none=True)
        value.backward()
        opt.step()
    return _timed(step)


@functools.lru_cache(maxsize=None)
@_announced(lambda sizes, vocab, images, captions, *rest, **kw:
            f"the self-retrieval reward of {captions} captions among {images} images")
def retrieval_seconds(sizes: tuple, vocab: int, images: int, captions: int, max_len: int, device: str = "cpu",
                      threads: int = 1) -> float:
    """Seconds of the self-retrieval reward term of one SCST step (rl/rewards.py): the frozen joint space embeds
    the step's images and its sampled captions (full length: an upper bound) and each caption's hardest hinge.
    ``sizes``: (feature width, space width, word width, GRU layers)."""
    from joint.losses.hinges import caption_hinges
    from joint.model import JointSpace

    channels, embed, word, layers = sizes
    torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = JointSpace(vocab, channels, embed, word, "fc", layers).to(dev).eval()
    feats = torch.rand(images, channels, device=dev)
    ids = torch.randint(1, vocab + 1, (captions, max_len), device=dev)
    owner = torch.arange(captions, device=dev) % images

    def step():
        with torch.no_grad():
            caption_hinges(model.embed_images(feats), model.embed_captions(ids), owner)
    return _timed(step)


@functools.lru_cache(maxsize=None)
@_announced(lambda core, sizes, vocab, batch, seq_per_img, max_len, kind, *rest, **kw:
            f"one {core} {kind} step of {batch} images")
def captioner_seconds(core: str, sizes: tuple, vocab: int, batch: int, seq_per_img: int, max_len: int,
                      kind: str, samples: int = 5, device: str = "cpu", threads: int = 1) -> float:
    """Seconds of one captioner step: ``xe`` (teacher-forced forward, loss, backward, Adam), ``scst`` (the
    samples and the greedy captions of ``batch`` images, backward through the samples), ``greedy`` or
    ``beam`` (decoding ``batch`` images; random weights never stop early, so every caption is ``max_len``
    long: an upper bound). ``sizes``: (regions, channels, rnn, word embedding, attention, core args)."""
    from capcore.optim import adam
    from captioners import decoding
    from captioners.model import Captioner, xe_loss
    from rl.scst_loss import greedy_captions, sample_captions

    regions, channels, rnn, embed, att_hid, core_args = sizes
    torch.set_num_threads(threads)
    dev = torch.device(device)
    torch.manual_seed(0)
    model = Captioner(core, vocab, channels, channels, embed, rnn, att_hid, 0.5, core_args=dict(core_args)).to(dev)
    opt = adam(model.parameters(), fused=False, lr=1e-4)  # the captioners' own (captioners/loop.py)
    att = torch.rand(batch, regions, channels, device=dev)
    fc = att.mean(1)
    seq = torch.randint(1, vocab + 1, (batch, seq_per_img, max_len), device=dev)

    def step():
        if kind == "xe":
            model.train()
            loss = xe_loss(model(fc, att, seq), seq.view(-1, max_len))
        elif kind == "scst":
            model.train()
            greedy_captions(model, fc, att, max_len)
            loss = -sample_captions(model, fc, att, samples, max_len).logprob.sum()
        else:
            model.eval()
            with torch.no_grad():
                if kind == "greedy":
                    decoding.greedy(model, fc, att, max_len)
                else:
                    decoding.beam_search(model, fc, att, 2, max_len)  # the test split's (capaware.stage)
            return
        opt.zero_grad(set_to_none=True)
        loss.backward()
        opt.step()

    return _timed(step)


@functools.lru_cache(maxsize=None)
@_announced(lambda: "the start of a stage command (importing torch)")
def process_seconds() -> float:
    """Seconds a stage command spends starting: a Python process importing torch, torchvision and h5py."""
    import subprocess
    import sys

    def start():
        subprocess.run([sys.executable, "-c", "import torch, torchvision, h5py"], check=True)
    start()  # the first start reads the libraries from disk; a stage command finds them in the page cache
    return statistics.median(_seconds(start) for _ in range(2))


def _seconds(fn) -> float:
    t0 = time.perf_counter()
    fn()
    return time.perf_counter() - t0


@functools.lru_cache(maxsize=None)
@_announced(lambda images: f"scoring (the PTB tokenizer and METEOR in Java) for {images} images")
def scoring_seconds(images: int) -> float:
    """Seconds to score ``images`` captions with pycocoevalcap (the PTB tokenizer and METEOR are Java processes
    started per call): the line through 2 and 20 images; 0 where Java is missing (the preflight refuses the
    run then)."""
    from eval import captions_java
    from eval.score_captions import score_captions

    if captions_java.java_info() is None:
        return 0.0
    words = "a red circle and a blue square on the left of a green triangle".split()

    def score(n: int) -> float:
        preds = {i: " ".join(words[i % 5:i % 5 + 6]) for i in range(n)}
        refs = {i: [" ".join(words[(i + k) % 7:(i + k) % 7 + 7]) for k in range(5)] for i in range(n)}
        t0 = time.perf_counter()
        score_captions(preds, refs, spice=False)
        return time.perf_counter() - t0

    t2, t20 = score(2), score(20)
    return max(t2 + (images - 2) * (t20 - t2) / 18, t2)
