"""The SCST signature: one string that says which self-critical variant trained a model.

SacreEOS (Barraco et al. 2023) showed that SCST results are not comparable unless one knows whether
the end-of-sentence token was inside the CIDEr-D reward (leaving it out lets SCST stop mid-phrase for up
to +4.1 CIDEr-D of artificial gain), and asked every paper to print a signature. Ours follows its
layout (variant, reward, baseline with its sample count, ``+``-joined) and adds what else changes the
numbers on the embedded default: a BLEU-4 term of the reward when there is one, the document-frequency
corpus, the XE weight of the mixed objective and the sampling temperature::

    Standard_wInit+Cider-D[n4,s6.0]+average[nspi5]+df[train@3f2a9c1e]+xe[1.0]+t[0.5]

``Standard`` = the EOS is a word of the reward (``No<Eos>`` = it is not); ``wInit`` = started from XE
weights (always, here); ``average`` = each sample's baseline is the mean reward of its image's other
samples, ``greedy`` = the greedy caption's reward (Rennie et al.); ``df[split@sha]`` = document
frequencies of that split of the reference captions whose sha256 (:func:`references_sha256`) starts
so; ``+Bleu-4[w0.5]`` (only when ``reward.bleu4_weight`` > 0) = 0.5 x sentence BLEU-4 added to the
reward; ``+SelfRet[a1,vse_pp,m0.2,j<8 hex>]`` (only when ``retrieval.weight`` > 0) = alpha x minus the self-retrieval
hinge (Liu et al. 2018; rl/rewards.py), its loss, margin and the first hex digits of the joint model's weights'
sha256 (joint.loading.weights_sha256), followed by ``+Unl[r1,w10-100]`` when unlabeled images join each batch
(ratio, hard-negative rank window; ``w0-0``: uniform draws). It is written on every SCST run's checkpoint,
manifest and metrics file, and printed by eval.score_captions and in Table 1.
"""
from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

import numpy as np

BASELINE_NAMES = {"mean": "average", "greedy": "greedy"}  # config value -> signature word
_PATTERN = re.compile(
    r"^(?P<eos>Standard|No<Eos>)_wInit\+Cider-D\[n(?P<n>\d+),s(?P<sigma>[0-9.]+)\]"
    r"(?:\+Bleu-4\[w(?P<bleu4>[0-9.e+-]+)\])?"
    r"(?:\+SelfRet\[a(?P<alpha>[0-9.e+-]+),(?P<rloss>vse_pp|vse0),m(?P<margin>[0-9.e+-]+),j(?P<joint>[0-9a-f]+)\]"
    r"(?:\+Unl\[r(?P<ratio>[0-9.e+-]+),w(?P<lo>\d+)-(?P<hi>\d+)\])?)?"
    r"\+(?P<baseline>average|greedy)\[nspi(?P<samples>\d+)\]\+df\[(?P<df>[^\]]+)\]"
    r"\+xe\[(?P<xe>[0-9.e+-]+)\]\+t\[(?P<t>[0-9.e+-]+)\]$")


@dataclass(frozen=True)
class SCSTSignature:
    eos: bool  # the end token is a word of the reward
    baseline: str  # greedy | mean (rl.config's names)
    samples: int  # sampled captions per image
    df: str  # document-frequency corpus: "<split>@<first 8 hex of the labels file's sha256>"
    xe_weight: float  # weight of the XE term of the mixed objective (0: plain SCST)
    temperature: float = 1.0  # sampling temperature
    sigma: float = 6.0  # CIDEr-D's length penalty
    n: int = 4  # n-gram orders
    bleu4_weight: float = 0.0  # weight of sentence BLEU-4 in the reward (0: CIDEr-D alone)
    retrieval: str = ""  # "alpha,loss,margin,joint" of the self-retrieval term, as written; "": none
    unlabeled: str = ""  # "ratio,lo-hi" of the unlabeled images; "": none

    def __str__(self) -> str:
        bleu = f"+Bleu-4[w{self.bleu4_weight:g}]" if self.bleu4_weight else ""
        if self.retrieval:
            bleu += f"+SelfRet[{self.retrieval}]" + (f"+Unl[{self.unlabeled}]" if self.unlabeled else "")
        return (f"{'Standard' if self.eos else 'No<Eos>'}_wInit+Cider-D[n{self.n},s{self.sigma:g}]{bleu}"
                f"+{BASELINE_NAMES[self.baseline]}[nspi{self.samples}]+df[{self.df}]"
                f"+xe[{self.xe_weight:g}]+t[{self.temperature:g}]")

    @classmethod
    def parse(cls, text: str) -> "SCSTSignature":
        m = _PATTERN.match(text.strip())
        if not m:
            raise ValueError(f"not an SCST signature: {text!r}")
        baseline = {v: k for k, v in BASELINE_NAMES.items()}[m["baseline"]]
        return cls(eos=m["eos"] == "Standard", baseline=baseline, samples=int(m["samples"]), df=m["df"],
                   xe_weight=float(m["xe"]), temperature=float(m["t"]), sigma=float(m["sigma"]), n=int(m["n"]),
                   bleu4_weight=float(m["bleu4"] or 0.0),
                   retrieval=f"a{m['alpha']},{m['rloss']},m{m['margin']},j{m['joint']}" if m["alpha"] else "",
                   unlabeled=f"r{m['ratio']},w{m['lo']}-{m['hi']}" if m["ratio"] else "")


def references_sha256(labels) -> str:
    """sha256 of what the reward's references are: every caption's word ids, which image each belongs
    to, and each image's split (captioners.prepro.Labels). Not of labels.h5's bytes, which also record
    where its source json lay: two copies of one run in two folders must sign alike."""
    h = hashlib.sha256()
    for array in (labels.labels, labels.start_ix, labels.end_ix, labels.image_ids):
        h.update(np.ascontiguousarray(array).astype(np.int64).tobytes())
    h.update("\n".join(map(str, labels.splits)).encode())
    return h.hexdigest()


def signature_of(cfg, labels_sha256: str, joint_sha256: str | None = None) -> SCSTSignature:
    """The signature of an SCST config (rl.config.SCSTConfig) whose references hash to this
    (:func:`references_sha256`), and whose joint model file (when ``retrieval.weight`` > 0) hashes to
    ``joint_sha256``."""
    t, r = cfg.train, cfg.reward
    sr = cfg.get("retrieval")
    on = sr is not None and sr.weight > 0
    if on and not joint_sha256:
        raise ValueError("a self-retrieval reward's signature needs its joint model's sha256")
    retrieval = f"a{sr.weight:g},{sr.loss},m{sr.margin:g},j{joint_sha256[:8]}" if on else ""
    unlabeled = f"r{sr.unlabeled_ratio:g},w{sr.window[0]}-{sr.window[1]}" if on and sr.unlabeled else ""
    return SCSTSignature(eos=bool(r.eos), baseline=t.baseline, samples=int(t.samples_per_image),
                         df=f"{r.df_split}@{labels_sha256[:8]}", xe_weight=float(t.xe_weight),
                         temperature=float(t.temperature), sigma=float(r.sigma),
                         bleu4_weight=float(r.bleu4_weight), retrieval=retrieval, unlabeled=unlabeled)
