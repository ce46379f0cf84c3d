"""Gordo & Larlus 2017's text tower (§5.2) and their text-modifier queries (Fig. 5), in the joint room.

``θ(t) = Wᵀt / ‖Wᵀt‖``: ``t`` is an image's l2-normalised tf-idf caption bag (stage one's label space builds it:
``embedder.labels.tfidf.TfidfSpace``, Snowball-stemmed, idf from the training images) and ``W`` a learned [V, D]
matrix into the visual embedding's space. The tower reads the bags as a torch sparse matrix (COCO's vocabulary is
tens of thousands of stems, a bag a few dozen), so a step multiplies only the bag's rows of ``W``.

A word's concept embedding is θ of its own one-hot tf-idf bag (one stem: after l2 normalisation its idf cancels),
that is the normalised row of ``W``; a modified query adds the embeddings of the words to add to the query image's
embedding, subtracts those to remove, and renormalises. A word whose stem the vocabulary lacks is one line naming
the nearest stems (``difflib``'s ratio: a misspelling is a few edits away).

It depends on stems and sizes only, not on stage one: the vocabulary and a stemmer are passed in.
"""
from __future__ import annotations

import difflib
from typing import Callable, Sequence

import numpy as np
import torch
import torch.nn.functional as F
from torch import nn

from capcore.errors import CapawareError


class TfidfTextEncoder(nn.Module):
    """θ(t) = Wᵀt/‖Wᵀt‖ over a [V]-stem vocabulary into a [D] space."""

    def __init__(self, vocab_size: int, embed_dim: int):
        super().__init__()
        self.weight = nn.Parameter(torch.randn(vocab_size, embed_dim) / np.sqrt(embed_dim))

    def forward(self, bags: torch.Tensor) -> torch.Tensor:
        """[B, D] from ``bags`` [B, V], dense or torch sparse COO."""
        projected = torch.sparse.mm(bags, self.weight) if bags.is_sparse else bags @ self.weight
        return F.normalize(projected, dim=-1)

    def concept(self, stem_ids: Sequence[int]) -> torch.Tensor:
        """[len, D]: θ of each stem's one-hot bag, the normalised rows of W."""
        return F.normalize(self.weight[torch.as_tensor(list(stem_ids), dtype=torch.long)], dim=-1)


def scipy_to_torch(matrix) -> torch.Tensor:
    """A scipy sparse matrix (the label space's tf-idf rows) as a float32 torch sparse COO tensor (COO: torch's
    stable sparse layout; its CSR layout is still beta)."""
    m = matrix.tocoo()
    indices = torch.as_tensor(np.vstack([m.row, m.col]), dtype=torch.int64)
    return torch.sparse_coo_tensor(indices, torch.as_tensor(m.data, dtype=torch.float32), size=m.shape,
                                   check_invariants=True).coalesce()


def stem_ids(words: Sequence[str], vocab: Sequence[str], stem: Callable[[str], str]) -> list[int]:
    """The vocabulary index of each word's stem; an unknown one is one CapawareError naming the nearest stems."""
    index = {w: i for i, w in enumerate(vocab)}
    out = []
    for word in words:
        s = stem(word.lower())
        if s not in index:
            near = difflib.get_close_matches(s, list(vocab), n=3, cutoff=0.5)
            raise CapawareError(word, f"not in the caption vocabulary (stem {s!r})",
                                f"nearest: {', '.join(near)}" if near else "use words of the training captions")
        out.append(index[s])
    return out


def modified_query(image: torch.Tensor, tower: TfidfTextEncoder, add: Sequence[int] = (),
                   remove: Sequence[int] = ()) -> torch.Tensor:
    """[D]: the query image's embedding plus the concepts to add, minus those to remove, renormalised."""
    q = F.normalize(image.reshape(-1), dim=0)
    if add:
        q = q + tower.concept(add).sum(0)
    if remove:
        q = q - tower.concept(remove).sum(0)
    return F.normalize(q, dim=0)
