"""The SCST reward, term by term: one table entry per term, summed into each sampled caption's reward.

A term is built from the run's config (``None`` when the config leaves it off) and scores several groups of
captions of one step at once (the samples and the greedy baseline's captions: one n-gram table, one image
embedding pass). Each returns one number per caption, already weighted; the reward is their sum. The loop
(rl/scst.py) never asks which terms there are: a new reward is a class and one line in ``TERMS``.

- ``cider_d``: CIDEr-D against the caption's own image's references (rl/cider.py), plus ``reward.bleu4_weight`` x
  sentence BLEU-4 (self-critical.pytorch's ``bleu_reward_weight``). One term, not two, because both read the same
  n-gram keys of the same captions and references, built once. An unlabeled image has no references: its
  captions get 0 here, so they learn from the retrieval term alone (Liu et al. 2018, §3.3).
- ``self_retrieval``: ``retrieval.weight`` x minus the caption's text -> image hinge against every image of the
  step (its own image the positive; the batch's other images and the unlabeled ones the negatives), in a frozen
  joint space (joint/): the hardest negative (``vse_pp``, the paper's Eq. 4) or the sum over all (``vse0``).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path
from typing import Callable, Optional, Protocol

import numpy as np
import torch

from capcore.checkpoint import file_sha256
from captioners.prepro import Labels
from joint.card import check_fits
from joint.loading import load_joint
from joint.losses.hinges import caption_hinges
from rl.cider import CiderReward, DocFreq

UNLABELED = -1
"""``label_ix`` of a caption whose image has no references (an unlabeled image)."""


@dataclass(frozen=True)
class Captions:
    """One group of captions to score: ``seq`` [M, T] word ids (0 after the end), ``label_ix`` [M] their images'
    rows in labels.h5 (UNLABELED: none), ``image`` [M] their images' rows among the step's images."""
    seq: torch.Tensor
    label_ix: np.ndarray
    image: np.ndarray


@dataclass(frozen=True)
class StepImages:
    """Every image of the step, labeled ones first: the features the captioner read."""
    fc: torch.Tensor
    att: torch.Tensor


class RewardTerm(Protocol):
    def __call__(self, groups: list[Captions], images: StepImages) -> list[np.ndarray]: ...


@dataclass(frozen=True)
class RewardInputs:
    """What a term may be built from: the SCST config, the references, the features file and vocabulary."""
    cfg: object  # rl.config.SCSTConfig
    labels: Labels
    doc_freq: DocFreq
    features: Path
    vocab: Path  # vocab.json
    vocab_size: int  # words 1..V: V
    feat_dim: int
    device: torch.device


class NgramTerm:
    """CIDEr-D (+ w x BLEU-4) of labeled images' captions; 0 for unlabeled ones."""

    def __init__(self, reward: CiderReward):
        self.reward = reward

    def __call__(self, groups: list[Captions], images: StepImages) -> list[np.ndarray]:
        labeled = [g.label_ix != UNLABELED for g in groups]
        scores = self.reward.together(*[(g.seq[torch.as_tensor(k, device=g.seq.device)], g.label_ix[k])
                                        for g, k in zip(groups, labeled)])
        out = [np.zeros(len(g.label_ix)) for g in groups]
        for o, k, s in zip(out, labeled, scores):
            o[k] = s
        return out


class SelfRetrievalTerm:
    """``weight`` x minus each caption's text -> image hinge against the step's images, in a frozen joint space."""

    def __init__(self, model, weight: float, margin: float, hardest: bool):
        self.model, self.weight, self.margin, self.hardest = model, weight, margin, hardest
        self.source = model.image.source

    @torch.no_grad()
    def hinges(self, groups: list[Captions], images: StepImages) -> list[np.ndarray]:
        feats = images.fc if self.source == "fc" else images.att
        img = self.model.embed_images(feats.float())
        width = max(g.seq.shape[1] for g in groups)
        seq = torch.cat([torch.nn.functional.pad(g.seq, (0, width - g.seq.shape[1])) for g in groups])
        txt = self.model.embed_captions(seq.to(img.device))
        owner = torch.as_tensor(np.concatenate([g.image for g in groups]), device=img.device)
        h = caption_hinges(img, txt, owner, self.margin, self.hardest).double().cpu().numpy()
        return np.split(h, np.cumsum([len(g.image) for g in groups])[:-1])

    def __call__(self, groups: list[Captions], images: StepImages) -> list[np.ndarray]:
        return [-self.weight * h for h in self.hinges(groups, images)]


def ngram_term(x: RewardInputs) -> NgramTerm:
    r = x.cfg.reward
    return NgramTerm(CiderReward(x.labels, x.doc_freq, r.sigma, r.bleu4_weight))


def self_retrieval_term(x: RewardInputs) -> Optional[SelfRetrievalTerm]:
    r = x.cfg.retrieval
    if r.weight <= 0:
        return None
    model, card = load_joint(r.model, x.device)
    check_fits(card, x.vocab_size, x.feat_dim, file_sha256(x.vocab), str(x.features), r.model)
    return SelfRetrievalTerm(model, float(r.weight), float(r.margin), r.loss == "vse_pp")


@dataclass(frozen=True)
class TermEntry:
    name: str  # the key of its share of the reward in the step's stats (reward_<name>) and TensorBoard
    build: Callable[[RewardInputs], Optional[RewardTerm]]


TERMS = (TermEntry("cider_d", ngram_term), TermEntry("self_retrieval", self_retrieval_term))


class Reward:
    """The terms a config turns on, summed."""

    def __init__(self, terms: dict[str, RewardTerm]):
        self.terms = terms

    @classmethod
    def of(cls, inputs: RewardInputs) -> "Reward":
        built = {e.name: e.build(inputs) for e in TERMS}
        return cls({k: v for k, v in built.items() if v is not None})

    def stat_names(self) -> tuple[str, ...]:
        return tuple(f"reward_{name}" for name in self.terms)

    def together(self, *groups: Captions, images: StepImages) -> tuple[list[np.ndarray], dict[str, float]]:
        """Each group's rewards (the sum of the terms), and each term's mean over the first group (the samples)."""
        parts = {name: term(list(groups), images) for name, term in self.terms.items()}
        total = [sum(p[i] for p in parts.values()) for i in range(len(groups))]
        return total, {f"reward_{name}": float(np.mean(p[0])) for name, p in parts.items()}
