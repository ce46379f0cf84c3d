"""Retrieval evaluation of a joint image-text space (issue #66): image->text (i2t) and text->image (t2i) R@K,
medr, meanr and rsum, over the full set and in the 1K five-fold protocol, as fartashf/vsepp's ``evalrank`` prints
them. Used by the joint stage, the report and ``capaware score``; callers pass the test split's embeddings.

- **Similarity** is the dot product (the embeddings come l2-normalised, so it is the cosine).
- **Order and ties.** A query's candidates are ordered by similarity, highest first; equal similarities keep the
  candidates' index order (the lower index first), the order of a stable descending sort. So a candidate's 0-based
  rank is the number of candidates scoring higher plus the equal ones of lower index, and a tie never depends on the
  chunk size, the device or a sort's algorithm.
- **i2t**: an image's rank is the best rank among its own captions (vsepp's ``i2t`` takes the minimum over the
  image's five). Any number of captions per image: ``txt_image[j]`` is caption j's image. i2t R@K is then the share
  of images with at least one own caption in their top K, which is torchmetrics' ``RetrievalHitRate``, not
  ``RetrievalRecall`` (that would be the share of an image's captions found in its top K).
- **t2i**: a caption's rank is that of its own image among all the images.
- **Numbers**: R@K in percent; ``medr = floor(median of the 0-based ranks) + 1`` and ``meanr = mean of the 0-based
  ranks + 1`` (1-based, vsepp's formulas); ``rsum`` is the sum of the i2t and t2i R@K (R@1, 5, 10: six numbers).
- **1K folds** (vsepp's ``evalrank(fold5=True)``): consecutive blocks of ``size`` images with their captions, each
  scored on its own, the metrics averaged field by field (medr too, as vsepp does). Images after the last full
  block are left out of the folds (``Folds.left_out`` says how many), so every fold has ``size`` candidates.

Why hand-written, not torchmetrics: ``RetrievalHitRate`` gives R@K but neither medr, meanr nor the 1K folds, which
need the ranks anyway; and it takes the flattened score matrix with a query index per entry (5,000 images x 25,000
captions: 125M scores and 1 GB of int64 indexes) and sorts every query's whole list. Here the ranks are counts over
chunks of queries (``chunk`` rows of the similarity matrix at a time: 256 x 25,000 floats, 26 MB), no sort.
tests/joint/test_recall.py checks every number against an independent computation: torchmetrics'
``RetrievalHitRate`` for R@K, a NumPy stable argsort per query for the ranks, medr and meanr.
"""
from __future__ import annotations

import math
from dataclasses import dataclass, fields
from typing import NamedTuple, Sequence

import numpy as np
import torch

KS = (1, 5, 10)
CHUNK = 256


class QueryRanks(NamedTuple):
    """Per-query results, 0-based: ``i2t[i]`` is image i's best rank among its captions, ``t2i[j]`` caption j's rank
    of its own image; ``i2t_top1``/``t2i_top1`` the caption/image each query retrieves first (ties: lowest index)."""
    i2t: torch.Tensor
    t2i: torch.Tensor
    i2t_top1: torch.Tensor
    t2i_top1: torch.Tensor


@dataclass(frozen=True)
class RankMetrics:
    """One evaluation's numbers: R@K in percent for each of ``ks``, medr and meanr 1-based."""
    ks: tuple[int, ...]
    i2t: tuple[float, ...]
    t2i: tuple[float, ...]
    i2t_medr: float
    i2t_meanr: float
    t2i_medr: float
    t2i_meanr: float

    @property
    def rsum(self) -> float:
        return float(sum(self.i2t) + sum(self.t2i))

    def as_dict(self) -> dict[str, float]:
        """Flat: ``i2t_r1 ... i2t_medr, i2t_meanr, t2i_r1 ... t2i_meanr, rsum``."""
        out = {}
        for side in ("i2t", "t2i"):
            out.update({f"{side}_r{k}": r for k, r in zip(self.ks, getattr(self, side))})
            out.update({f"{side}_medr": getattr(self, f"{side}_medr"), f"{side}_meanr": getattr(self, f"{side}_meanr")})
        out["rsum"] = self.rsum
        return out

    def lines(self) -> list[str]:
        """vsepp's printout: rsum, then each direction's R@K, medr and meanr."""
        return [f"rsum: {self.rsum:.1f}",
                "Image to text: " + " ".join(f"{v:.1f}" for v in (*self.i2t, self.i2t_medr, self.i2t_meanr)),
                "Text to image: " + " ".join(f"{v:.1f}" for v in (*self.t2i, self.t2i_medr, self.t2i_meanr))]

    @classmethod
    def mean(cls, results: Sequence[RankMetrics]) -> RankMetrics:
        """Field-by-field mean of several evaluations with the same ``ks`` (vsepp's fold5 mean)."""
        if not results or any(r.ks != results[0].ks for r in results):
            raise ValueError("RankMetrics.mean needs one or more results with the same ks")
        avg = {}
        for f in fields(cls):
            if f.name != "ks":
                values = np.array([getattr(r, f.name) for r in results], dtype=np.float64)
                avg[f.name] = tuple(values.mean(0).tolist()) if values.ndim == 2 else float(values.mean())
        return cls(ks=results[0].ks, **avg)


@dataclass(frozen=True)
class Folds:
    """The full set's metrics and the 1K protocol's: ``each`` fold's and their ``mean`` (None without a full fold)."""
    full: RankMetrics
    each: tuple[RankMetrics, ...]
    size: int
    left_out: int

    @property
    def mean(self) -> RankMetrics | None:
        return RankMetrics.mean(self.each) if self.each else None


def _inputs(img_emb, txt_emb, txt_image) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
    """As tensors on one device and dtype, checked: 2-D embeddings of one width, a caption index per caption in
    range, and every image with a caption (else its i2t rank has nothing to rank)."""
    img = torch.as_tensor(img_emb)
    txt = torch.as_tensor(txt_emb, device=img.device)
    if not img.is_floating_point():
        img = img.float()
    txt = txt.to(img.dtype)
    owner = torch.as_tensor(txt_image, device=img.device).long()
    if img.ndim != 2 or txt.ndim != 2 or img.shape[1] != txt.shape[1]:
        raise ValueError(f"recall: embeddings must be [N, D] and [M, D], got {tuple(img.shape)} and "
                         f"{tuple(txt.shape)}")
    if owner.shape != (txt.shape[0],):
        raise ValueError(f"recall: txt_image must hold one image index per caption ({txt.shape[0]}), "
                         f"got shape {tuple(owner.shape)}")
    if len(owner) and (owner.min() < 0 or owner.max() >= img.shape[0]):
        raise ValueError(f"recall: txt_image holds indexes outside 0..{img.shape[0] - 1}")
    counts = torch.bincount(owner, minlength=img.shape[0])
    if img.shape[0] == 0 or bool((counts == 0).any()):
        missing = torch.nonzero(counts == 0).flatten()[:5].tolist()
        raise ValueError(f"recall: every image needs a caption; images {missing} have none"
                         if img.shape[0] else "recall: no images")
    return img, txt, owner


def _rank_of(sims: torch.Tensor, target: torch.Tensor) -> torch.Tensor:
    """0-based rank of candidate ``target[r]`` in row r of ``sims``: higher scores, then equal ones of lower index."""
    own = sims.gather(1, target[:, None])
    columns = torch.arange(sims.shape[1], device=sims.device)
    return (sims > own).sum(1) + ((sims == own) & (columns[None, :] < target[:, None])).sum(1)


def _best_own(sims: torch.Tensor, own: torch.Tensor) -> torch.Tensor:
    """Per row, the own candidate (``own`` mask) that ranks first: the highest score, the lowest index among ties."""
    best = sims.masked_fill(~own, -math.inf).amax(1, keepdim=True)
    columns = torch.arange(sims.shape[1], device=sims.device).expand_as(sims)
    return columns.masked_fill(~(own & (sims == best)), sims.shape[1]).amin(1)


def query_ranks(img_emb, txt_emb, txt_image, chunk: int = CHUNK) -> QueryRanks:
    """Every image's i2t rank and every caption's t2i rank (0-based), ``chunk`` queries at a time."""
    img, txt, owner = _inputs(img_emb, txt_emb, txt_image)
    i2t, i2t_top1, t2i, t2i_top1 = [], [], [], []
    with torch.no_grad():
        for start in range(0, img.shape[0], chunk):
            sims = img[start:start + chunk] @ txt.T
            rows = torch.arange(start, start + sims.shape[0], device=img.device)
            i2t.append(_rank_of(sims, _best_own(sims, owner[None, :] == rows[:, None])))
            i2t_top1.append(sims.argmax(1))
        for start in range(0, txt.shape[0], chunk):
            sims = txt[start:start + chunk] @ img.T
            t2i.append(_rank_of(sims, owner[start:start + chunk]))
            t2i_top1.append(sims.argmax(1))
    return QueryRanks(*(torch.cat(parts).cpu() for parts in (i2t, t2i, i2t_top1, t2i_top1)))


def _summary(ranks: torch.Tensor, ks: Sequence[int]) -> tuple[tuple[float, ...], float, float]:
    """R@K in percent, medr and meanr (1-based) of 0-based ranks, with vsepp's formulas."""
    values = ranks.double().numpy()
    recall = tuple(float(100.0 * (values < k).mean()) for k in ks)
    return recall, float(np.floor(np.median(values)) + 1), float(values.mean() + 1)


def rank_metrics(img_emb, txt_emb, txt_image, ks: Sequence[int] = KS, chunk: int = CHUNK) -> RankMetrics:
    """i2t and t2i R@K, medr and meanr of images ``img_emb`` [N, D] and captions ``txt_emb`` [M, D], caption j
    describing image ``txt_image[j]`` (any number of captions per image, every image at least one)."""
    ranks = query_ranks(img_emb, txt_emb, txt_image, chunk)
    i2t, i2t_medr, i2t_meanr = _summary(ranks.i2t, ks)
    t2i, t2i_medr, t2i_meanr = _summary(ranks.t2i, ks)
    return RankMetrics(tuple(ks), i2t, t2i, i2t_medr, i2t_meanr, t2i_medr, t2i_meanr)


def folds(img_emb, txt_emb, txt_image, size: int = 1000, ks: Sequence[int] = KS, chunk: int = CHUNK) -> Folds:
    """The full set's metrics and the 1K protocol's: images ``[f * size, (f + 1) * size)`` with their captions
    (wherever they sit in ``txt_emb``), each fold scored alone; images after the last full fold are left out."""
    img, txt, owner = _inputs(img_emb, txt_emb, txt_image)
    each = []
    for start in range(0, img.shape[0] - size + 1, size):
        keep = (owner >= start) & (owner < start + size)
        each.append(rank_metrics(img[start:start + size], txt[keep], owner[keep] - start, ks, chunk))
    return Folds(full=rank_metrics(img, txt, owner, ks, chunk), each=tuple(each), size=size,
                 left_out=img.shape[0] % size)
