"""The joint stage's training step beside fartashf/vsepp's own, at the same sizes, on this machine, in one run.

``python benchmarks/bench_joint_vs_vsepp.py --vsepp DIR [--batch 128] [--vocab 93] [--feat 512] [--embed 256]
[--word 128] [--length 16] [--steps 40] [--repeats 5] [--threads 1] [--max-violation]``

DIR is a checkout of https://github.com/fartashf/vsepp (its ``model.py`` is imported from there, never copied
into capaware). One step, both sides: image projection + GRU text encoder + hinge loss (VSE0; VSE++ with
``--max-violation``) + backward + Adam, float32, batches of random features and captions of random lengths.
vsepp's side is its ``EncoderImagePrecomp``, ``EncoderText`` and ``ContrastiveLoss``, fed as its own ``collate_fn``
feeds them (captions sorted by length, longest first, and the lengths list); capaware's is ``joint.model.JointSpace``
and ``joint.losses``, fed unsorted (it packs the batch itself). Two shims let vsepp run on a CPU, where its code
calls ``.cuda()`` unconditionally (``EncoderText.forward``; its users' first complaint): ``Tensor.cuda`` returns the
tensor itself while vsepp's step runs, and nothing else is changed. Both losses are checked equal on one batch
before timing (same weights copied across). Medians of alternating repeats.
"""
from __future__ import annotations

import argparse
import sys
import time
from contextlib import contextmanager
from pathlib import Path

import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from joint.losses.vse import VSE0, VSEPlusPlus  # noqa: E402
from joint.model import JointSpace  # noqa: E402


@contextmanager
def cuda_is_identity():
    """vsepp calls ``.cuda()`` on a tensor in every text forward; on a CPU that raises. Here it is a no-op."""
    original = torch.Tensor.cuda
    torch.Tensor.cuda = lambda self, *a, **k: self
    try:
        yield
    finally:
        torch.Tensor.cuda = original


def batch(a, g: torch.Generator):
    feats = torch.randn(a.batch, a.feat, generator=g)
    lengths = torch.randint(3, a.length + 1, (a.batch,), generator=g)
    ids = torch.randint(1, a.vocab + 1, (a.batch, a.length), generator=g)
    ids[torch.arange(a.length)[None, :] >= lengths[:, None]] = 0
    return feats, ids, lengths


def ours(a):
    model = JointSpace(a.vocab, a.feat, a.embed, a.word)
    loss = VSEPlusPlus(0.2) if a.max_violation else VSE0(0.2)
    opt = torch.optim.Adam(model.parameters(), lr=2e-4)

    def step(feats, ids, lengths):
        img, txt = model(feats, ids)
        value = loss(img, txt)
        opt.zero_grad()
        value.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 2.0)
        opt.step()
        return float(value.detach())
    return model, step


def theirs(a, vsepp):
    img_enc = vsepp.EncoderImagePrecomp(a.feat, a.embed)
    txt_enc = vsepp.EncoderText(a.vocab + 1, a.word, a.embed, 1)
    loss = vsepp.ContrastiveLoss(margin=0.2, max_violation=a.max_violation)
    params = list(txt_enc.parameters()) + list(img_enc.fc.parameters())
    opt = torch.optim.Adam(params, lr=2e-4)

    def step(feats, ids, lengths):
        order = torch.argsort(lengths, descending=True, stable=True)  # as vsepp's collate_fn sorts a batch
        with cuda_is_identity():
            img, txt = img_enc(feats[order]), txt_enc(ids[order], lengths[order].tolist())
            value = loss(img, txt)
        opt.zero_grad()
        value.backward()
        torch.nn.utils.clip_grad_norm_(params, 2.0)
        opt.step()
        return float(value.detach())
    return (img_enc, txt_enc), step


def same_weights(model: JointSpace, encoders) -> None:
    img_enc, txt_enc = encoders
    with torch.no_grad():
        img_enc.fc.weight.copy_(model.image.proj.weight)
        img_enc.fc.bias.copy_(model.image.proj.bias)
        txt_enc.embed.weight.copy_(model.text.embed.weight)
        txt_enc.rnn.load_state_dict(model.text.rnn.state_dict())


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--vsepp", required=True, help="a checkout of fartashf/vsepp (its model.py is imported)")
    for name, default in (("batch", 128), ("vocab", 93), ("feat", 512), ("embed", 256), ("word", 128),
                          ("length", 16), ("steps", 40), ("repeats", 5), ("threads", 1)):
        p.add_argument(f"--{name}", type=int, default=default)
    p.add_argument("--max-violation", action="store_true", help="VSE++ (default: VSE0, the demo's loss)")
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    sys.path.insert(0, str(Path(a.vsepp).resolve()))
    import model as vsepp  # fartashf/vsepp's model.py

    torch.manual_seed(0)
    model, ours_step = ours(a)
    encoders, theirs_step = theirs(a, vsepp)
    same_weights(model, encoders)
    g = torch.Generator().manual_seed(1)
    check = batch(a, g)
    lo, hi = ours_step(*check), theirs_step(*check)
    assert abs(lo - hi) <= 1e-4 * max(1.0, abs(lo)), (lo, hi)  # the same loss from the same weights
    batches = [batch(a, g) for _ in range(a.steps)]
    times = {"capaware": [], "vsepp": []}
    for _ in range(a.repeats):
        for name, step in (("capaware", ours_step), ("vsepp", theirs_step)):
            t0 = time.perf_counter()
            for b in batches:
                step(*b)
            times[name].append((time.perf_counter() - t0) / a.steps * 1000)
    med = {k: sorted(v)[len(v) // 2] for k, v in times.items()}
    print(f"# joint step vs fartashf/vsepp: {cpu_line()}, {a.threads} thread(s), torch {torch.__version__}")
    print(f"batch {a.batch}, vocab {a.vocab}, feat {a.feat}, embed {a.embed}, word {a.word}, length <= {a.length}, "
          f"{'VSE++' if a.max_violation else 'VSE0'}; first-batch loss capaware {lo:.4f}, vsepp {hi:.4f}")
    print("| step | median ms (min) |\n|---|---:|")
    for k in ("capaware", "vsepp"):
        print(f"| {k} | {med[k]:.2f} ({min(times[k]):.2f}) |")
    print(f"capaware / vsepp: {med['capaware'] / med['vsepp']:.2f}x the time")


if __name__ == "__main__":
    main()
