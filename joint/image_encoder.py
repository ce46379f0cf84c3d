"""The image side of the joint space: stage two's features -> one l2-normalised vector (vsepp's
``EncoderImagePrecomp``).

It reads the features the captioners read (``feats.h5``, ``feature_extract/dump.py``), so the joint space and a
captioner see the same image: ``fc`` is the pooled vector ``[B, C]``; ``att`` is the grid ``[B, h*w, C]``, pooled
here by its mean over the cells. One linear map, Xavier-initialised as vsepp does, then the l2 norm: similarities
are cosines.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

SOURCES = ("fc", "att")


class ImageEncoder(nn.Module):
    def __init__(self, feat_dim: int, embed_dim: int, source: str = "fc"):
        super().__init__()
        if source not in SOURCES:
            raise ValueError(f"image source {source!r}: use one of {', '.join(SOURCES)}")
        self.source = source
        self.proj = nn.Linear(feat_dim, embed_dim)
        bound = math.sqrt(6.0) / math.sqrt(feat_dim + embed_dim)
        with torch.no_grad():
            self.proj.weight.uniform_(-bound, bound)
            self.proj.bias.zero_()

    def pooled(self, feats: torch.Tensor) -> torch.Tensor:
        """``fc`` [B, C] as it is, or the ``att`` grid [B, h*w, C] averaged over its cells, in the layer's dtype
        (a features file may hold bfloat16 or float16)."""
        want = 2 if self.source == "fc" else 3
        if feats.dim() != want:
            raise ValueError(f"{self.source} features must have {want} dimensions, got shape {tuple(feats.shape)}")
        feats = feats.to(self.proj.weight.dtype)
        return feats if self.source == "fc" else feats.mean(1)

    def forward(self, feats: torch.Tensor) -> torch.Tensor:
        """Features of B images -> [B, embed_dim], each row of unit length."""
        return F.normalize(self.proj(self.pooled(feats)), dim=-1)
