"""What the self-retrieval reward costs inside an SCST step, on a finished demo run.

``python benchmarks/bench_self_retrieval.py [--run runs/demo] [--features img] [--images 16] [--samples 5]
[--repeats 20] [--threads 1]``

One SCST step of the demo's recipe on ``--images`` training images (the XE Att2all2 of the run, its labels and
document frequencies, the joint space of the same features): the greedy baseline's captions, ``--samples`` sampled
captions per image with their log-probabilities, the reward, the loss and its backward. Timed three ways in
alternation: the step with CIDEr-D alone, the step with CIDEr-D + the self-retrieval term (rl/rewards.py), and the
self-retrieval term alone on the same captions; the share is the term's time over the whole step's. Medians (min).
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.checkpoint import load_checkpoint  # noqa: E402
from capcore.cpu_isa import cpu_line  # noqa: E402
from timing import median_seconds  # noqa: E402

from captioners.card import CaptionerCard  # noqa: E402
from captioners.data import CaptionDataset  # noqa: E402
from captioners.model import build_captioner  # noqa: E402
from captioners.prepro import read_labels  # noqa: E402
from joint.loading import load_joint  # noqa: E402
from rl.cider import CiderReward, load_or_build_doc_freq  # noqa: E402
from rl.rewards import Captions, NgramTerm, Reward, SelfRetrievalTerm, StepImages  # noqa: E402
from rl.scst_loss import baseline, greedy_captions, sample_captions, scst_loss  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--run", default="runs/demo")
    p.add_argument("--features", default="img")
    for name, default in (("images", 16), ("samples", 5), ("repeats", 20), ("threads", 1)):
        p.add_argument(f"--{name}", type=int, default=default)
    a = p.parse_args(argv)
    torch.set_num_threads(a.threads)
    run = Path(a.run)
    xe = load_checkpoint(run / "captioners" / f"{a.features}_att2all2" / "best.pt")
    model = build_captioner(dict(CaptionerCard.of(xe).model_args))
    model.load_state_dict(xe["model"])
    labels = read_labels(run / "captions" / "labels.h5")
    df = load_or_build_doc_freq(run / "captions" / "labels.h5", "train", eos=True)
    joint, _ = load_joint(run / "joint" / a.features / "best.pt")
    data = CaptionDataset(run / "features" / f"{a.features}.h5", labels, "train", in_memory=True)
    got = data.read_rows(torch.arange(a.images))
    fc, att = got["fc"].float(), got["att"].float()
    label_ix = data.label_ix[: a.images]
    cider = NgramTerm(CiderReward(labels, df))
    plain = Reward({"cider_d": cider})
    with_sr = Reward({"cider_d": cider, "self_retrieval": SelfRetrievalTerm(joint, 1.0, 0.2, True)})
    n, g = a.samples, torch.Generator().manual_seed(0)
    images = StepImages(fc, att)

    def groups():
        greedy = greedy_captions(model, fc, att, 16)
        dec = sample_captions(model, fc, att, n, 16, 0.5, g)
        return dec, [Captions(dec.seq, np.repeat(label_ix, n), np.repeat(np.arange(a.images), n)),
                     Captions(greedy, label_ix, np.arange(a.images))]

    def step(reward):
        model.train(False)
        dec, parts = groups()
        (r, greedy_r), _ = reward.together(*parts, images=images)
        r = r.reshape(a.images, n)
        scst_loss(dec.logprob, r, baseline("mean", r)).backward()

    fixed = groups()[1]
    term = with_sr.terms["self_retrieval"]
    (plain_t, sr_t, term_t) = median_seconds([lambda: step(plain), lambda: step(with_sr),
                                              lambda: term(fixed, images)], a.repeats)
    print(f"# self-retrieval reward in an SCST step: {cpu_line()}, {a.threads} thread(s), torch {torch.__version__}")
    print(f"{a.run}, {a.features} features, Att2all2, {a.images} images x {n} samples + greedy, float32")
    print("| what | median ms (min) |\n|---|---:|")
    for name, (med, low) in (("step, CIDEr-D", plain_t), ("step, CIDEr-D + self-retrieval", sr_t),
                             ("self-retrieval term alone", term_t)):
        print(f"| {name} | {med * 1000:.1f} ({low * 1000:.1f}) |")
    print(f"self-retrieval share of the step: {term_t[0] / sr_t[0]:.1%}; step time x{sr_t[0] / plain_t[0]:.2f}")


if __name__ == "__main__":
    main()
