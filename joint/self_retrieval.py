"""Self-retrieval of generated captions (Liu et al. 2018, Table 4): how well each image's own generated caption finds
that image among all the images scored, in a joint space.

Each image has one generated caption; as a query it ranks every image of the set by cosine, and its R@K is the
share of captions whose own image comes in the first K (the joint space's t2i R@K with one caption per image,
joint/recall.py, ties broken as there). Chance R@1 is 1 / (number of images). A caption is read into the joint
space's ids through its vocab.json: the words a captioner writes are that vocabulary's (it decodes labels.h5 ids),
so a word outside it can only come from captions of another vocabulary, and is refused in one line.
"""
from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
import torch

from capcore.errors import CapawareError
from joint import recall
from joint.model import JointSpace


def caption_ids(captions: Sequence[str], vocab_json: str | Path) -> torch.Tensor:
    """[N, L] word ids of whitespace-split captions (0 after each end; an empty caption is all 0)."""
    table = json.loads(Path(vocab_json).read_text())["ix_to_word"]
    ix = {w: int(i) for i, w in table.items()}
    rows = []
    for c in captions:
        words = c.split()
        unknown = [w for w in words if w not in ix]
        if unknown:
            raise CapawareError(vocab_json, f"the caption {c!r} has words outside this vocabulary ({unknown[:3]})",
                                "score captions with the joint model trained on their captioner's labels.h5")
        rows.append([ix[w] for w in words])
    out = torch.zeros(len(rows), max([len(r) for r in rows] + [1]), dtype=torch.long)
    for i, r in enumerate(rows):
        out[i, :len(r)] = torch.tensor(r, dtype=torch.long)
    return out


@dataclass(frozen=True)
class SelfRetrieval:
    metrics: recall.RankMetrics  # t2i: R@K in percent, medr, meanr over the images
    ranks: np.ndarray  # [N] 0-based rank of each caption's own image
    retrieved: np.ndarray  # [N] the row of the image each caption retrieves first

    def as_dict(self) -> dict:
        m = self.metrics
        return {**{f"r{k}": r for k, r in zip(m.ks, m.t2i)}, "medr": m.t2i_medr, "meanr": m.t2i_meanr,
                "chance_r1": 100.0 / len(self.ranks)}


@torch.no_grad()
def self_retrieval(model: JointSpace, feats: torch.Tensor, ids: torch.Tensor, chunk: int = 512) -> SelfRetrieval:
    """Caption i (row i of ``ids``) against the images ``feats`` (row i its own), in eval mode."""
    model.eval()
    img = torch.cat([model.embed_images(feats[i:i + chunk]) for i in range(0, len(feats), chunk)])
    txt = torch.cat([model.embed_captions(ids[i:i + chunk]) for i in range(0, len(ids), chunk)])
    owner = torch.arange(len(img))
    ranks = recall.query_ranks(img, txt, owner)
    return SelfRetrieval(recall.rank_metrics(img, txt, owner), ranks.t2i.numpy(), ranks.t2i_top1.numpy())
