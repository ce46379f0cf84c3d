"""SCST on CPU: the CIDEr-D reward of one batch (ours vs pycocoevalcap rebuilt per batch with the same
document frequencies, and vs self-critical.pytorch's get_self_critical_reward path), then whole SCST
steps per second and peak memory.

``python benchmarks/bench_scst.py [--labels runs/demo/captions/labels.h5] [--images 32] [--samples 5]
[--repeats 30] [--model demo|paper] [--steps 6] [--threads 1] [--no-eos]``

The reward is the EOS variant (rl.reward.eos, the default: the end token is a word, as in
self-critical.pytorch) unless ``--no-eos``.

Without ``--labels`` a shapes-captions set (1,200 training images, 16-word captions) is generated in a
temporary folder. Candidates look like sampled captions: each is one of its image's references with up
to 3 words replaced and its EOS moved, so n-grams overlap as they do in training. The baseline is what a
pycocoevalcap-based reward does per batch: a new CiderScorer (benchmarks/cider_reference.py's
fixed_df_scorer: its own cooking, tf-idf, clipping and penalty, told to use the training document
frequencies) fed every candidate and its references, then scored; it is timed without the id -> string
conversion (the conservative ratio) and with it. Both give the same numbers (max difference printed).
Medians (min) of alternating runs.

The self-critical.pytorch row rebuilds what its ``get_self_critical_reward`` does for one batch (its
code cannot be installed here: not on PyPI, no internet): every sampled and greedy caption through
``array_to_str`` (the EOS kept as "0"), the references of each of those 2 x rows written the same way,
one CiderD scorer over all of them with the training document frequencies (pycocoevalcap's CiderScorer
stands in for its fork ciderD_scorer.py, which cooks and scores the same way), and the greedy rewards
split off. Ours does the same work: the samples' and the greedy captions' rewards.
"""
from __future__ import annotations

import argparse
import os
import resource
import shlex
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capcore.cpu_isa import cpu_line  # noqa: E402
from timing import median_seconds  # noqa: E402

from benchmarks.cider_reference import FrozenDocFreq, doc_freq_as_ngrams, fixed_df_scorer, ids_to_string
from captioners.model import Captioner
from captioners.prepro import prepro, read_labels
from rl.cider import CiderReward, load_or_build_doc_freq
from rl.scst_loss import baseline, greedy_captions, sample_captions, scst_loss

MODELS = {  # (core, rnn, encoding, att_hid, regions, channels)
    "demo": ("att2all2", 128, 64, 64, 49, 512),  # configs/demo/demo_att2all2.yaml on resnet18 7 x 7 features
    "paper": ("att2all2", 512, 512, 512, 196, 2048),  # configs/paper/coco_att2all2.yaml on ResNet-101 14 x 14
}


def candidates(labels, label_ix: np.ndarray, base: int, rng) -> np.ndarray:
    rows = []
    for k, i in enumerate(label_ix):
        caps = labels.captions_of(int(i))
        c = caps[rng.integers(len(caps))].astype(np.int64).copy()
        n = int((c > 0).sum())
        c[rng.integers(0, max(n, 1), rng.integers(0, 4))] = rng.integers(1, base)
        end = int(np.clip(n + rng.integers(-3, 3), 1, len(c)))
        c[end:] = 0
        rows.append(c)
    return np.stack(rows)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--labels", default=None, help="a labels.h5 of captioners.prepro (default: generate one)")
    parser.add_argument("--images", type=int, default=32)
    parser.add_argument("--samples", type=int, default=5)
    parser.add_argument("--repeats", type=int, default=30)
    parser.add_argument("--model", default="demo", choices=sorted(MODELS))
    parser.add_argument("--steps", type=int, default=6, help="SCST steps timed (after one warm-up step)")
    parser.add_argument("--threads", type=int, default=1)
    parser.add_argument("--no-eos", action="store_true", help="the reward without the end token")
    args = parser.parse_args()
    torch.set_num_threads(args.threads)
    rss0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss

    tmp = None
    if args.labels is None:
        from capdata.synthetic import generate_captions

        tmp = tempfile.TemporaryDirectory()
        json_path = generate_captions(Path(tmp.name) / "data", n_train=1200, n_test=50, seed=0, size=32)
        prepro(json_path, Path(tmp.name) / "prep", threshold=5, max_length=16)
        args.labels = str(Path(tmp.name) / "prep" / "labels.h5")
    labels = read_labels(args.labels)
    eos = not args.no_eos
    df = load_or_build_doc_freq(args.labels, eos=eos)
    reward = CiderReward(labels, df)
    pycoco_df = FrozenDocFreq(doc_freq_as_ngrams(df))
    train = np.flatnonzero(labels.splits == "train")
    rng = np.random.default_rng(0)
    label_ix = np.repeat(rng.choice(train, args.images, replace=False), args.samples)
    cands = candidates(labels, label_ix, df.base, rng)
    cand_str = [ids_to_string(c, eos) for c in cands]
    ref_str = [[ids_to_string(s, eos) for s in labels.captions_of(int(i))] for i in label_ix]
    img_ix = label_ix[::args.samples]
    greedy = cands[::args.samples]  # one caption per image stands in for the greedy caption

    def ours():
        return reward(cands, label_ix)

    def ours_with_greedy():
        return reward.together((cands, label_ix), (greedy, img_ix))

    def pycoco(strings=None):
        scorer = fixed_df_scorer(pycoco_df, df.n_docs)
        if strings is None:
            for c, r in zip(cand_str, ref_str):
                scorer += (c, r)
        else:
            for c, i in zip(cands, label_ix):
                scorer += (ids_to_string(c, eos), [ids_to_string(s, eos) for s in labels.captions_of(int(i))])
        return scorer.compute_score()[1]

    def self_critical():
        """get_self_critical_reward's work: strings of samples + greedy, their images' references per row."""
        res = [ids_to_string(c, eos) for c in cands] + [ids_to_string(g, eos) for g in greedy]
        per_image = {int(i): [ids_to_string(s, eos) for s in labels.captions_of(int(i))] for i in img_ix}
        gts = [per_image[int(i)] for i in label_ix] + [per_image[int(i)] for i in img_ix]
        scorer = fixed_df_scorer(pycoco_df, df.n_docs)
        for c, r in zip(res, gts):
            scorer += (c, r)
        scores = scorer.compute_score()[1]
        return scores[:len(cands)], scores[len(cands):]

    diff = float(np.abs(ours() - pycoco()).max())
    diff_sc = max(float(np.abs(a - b).max()) for a, b in zip(ours_with_greedy(), self_critical()))
    (t_ours, m_ours), (t_ref, m_ref), (t_conv, m_conv), (t_og, m_og), (t_sc, m_sc) = median_seconds(
        [ours, pycoco, lambda: pycoco(strings=True), ours_with_greedy, self_critical], args.repeats, warmup=2)

    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, numpy {np.__version__}, {torch.get_num_threads()} thread(s), "
          f"{cpu_line()}, load average before start {os.getloadavg()[0]:.2f}")
    print(f"# labels {args.labels}: {len(train)} training images, vocabulary {df.base - 1}, "
          f"{len(df.keys)} distinct training n-grams; batch {args.images} images x {args.samples} samples "
          f"= {len(cands)} captions, {sum(map(len, ref_str)) // args.samples} references")
    print(f"reward (CIDEr-D, training df, {df.variant})       median (min) of {args.repeats}")
    print(f"  ours (rl.cider, vectorised)       {t_ours * 1e3:8.2f} ms ({m_ours * 1e3:.2f})")
    print(f"  pycocoevalcap per batch           {t_ref * 1e3:8.2f} ms ({m_ref * 1e3:.2f})   "
          f"ratio {t_ref / t_ours:5.1f}x")
    print(f"  pycocoevalcap + ids -> strings    {t_conv * 1e3:8.2f} ms ({m_conv * 1e3:.2f})   "
          f"ratio {t_conv / t_ours:5.1f}x")
    print(f"  max |ours - pycocoevalcap|        {diff:.1e}")
    print(f"samples + greedy captions ({len(cands)} + {len(greedy)}), as one SCST step needs them")
    print(f"  ours (rl.cider, vectorised)       {t_og * 1e3:8.2f} ms ({m_og * 1e3:.2f})")
    print(f"  self-critical.pytorch's path      {t_sc * 1e3:8.2f} ms ({m_sc * 1e3:.2f})   "
          f"ratio {t_sc / t_og:5.1f}x   (get_self_critical_reward rebuilt: array_to_str, CiderD per row)")
    print(f"  max |ours - self-critical path|   {diff_sc:.1e}")

    core, rnn, enc, hid, regions, channels = MODELS[args.model]
    torch.manual_seed(0)
    model = Captioner(core, df.base - 1, channels, channels, enc, rnn, hid, 0.5)
    opt = torch.optim.Adam(model.parameters(), lr=5e-4)
    B = args.images
    fc, att = torch.randn(B, channels), torch.randn(B, regions, channels).relu()
    gen = torch.Generator().manual_seed(0)
    t_reward = []

    def scst_step():
        model.train()
        greedy_seq = greedy_captions(model, fc, att, labels.max_length)
        dec = sample_captions(model, fc, att, args.samples, labels.max_length, 1.0, gen)
        s = time.perf_counter()
        r, greedy_r = reward.together((dec.seq, label_ix), (greedy_seq, img_ix))
        r = r.reshape(B, args.samples)
        t_reward.append(time.perf_counter() - s)
        loss = scst_loss(dec.logprob, r, baseline("greedy", r, greedy_r))
        opt.zero_grad(set_to_none=True)
        loss.backward()
        torch.nn.utils.clip_grad_value_(model.parameters(), 0.1)
        opt.step()

    scst_step()  # warm-up (first autograd / allocator calls)
    rss1 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    t_reward.clear()
    start = time.perf_counter()
    for _ in range(args.steps):
        scst_step()
    per_step = (time.perf_counter() - start) / args.steps
    rss2 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    print(f"SCST step on CPU ({args.model} model: {core}, rnn {rnn}, features {regions} x {channels}; batch {B} "
          f"images, {args.samples} samples + greedy baseline, max {labels.max_length} words)")
    print(f"  {1 / per_step:.2f} steps/s ({per_step * 1e3:.0f} ms/step), of which reward "
          f"{np.mean(t_reward) * 1e3:.1f} ms "
          f"(pycocoevalcap would add ~{(t_ref / t_ours - 1) * np.mean(t_reward) * 1e3:.0f}"
          f" ms)")
    print(f"  peak RSS {rss2 / 1024:.0f} MiB: imports {rss0 / 1024:.0f} MiB, then data, reward tables, model "
          f"and one warm-up step {rss1 / 1024:.0f} MiB, then {args.steps} timed steps +{(rss2 - rss1) / 1024:.0f} MiB")
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
