"""Gordo & Larlus 2017's textual losses (§5.2, Eq. 2 and 3), added to any stage-one row's loss.

Each batch member's text is its image's tf-idf caption bag (the ``tfidf`` label space's rows), embedded by the
joint room's tower θ(t) = Wᵀt/‖Wᵀt‖ (joint.tfidf_text) into the row's embedding space. With φ the images'
normalised embeddings and "relevant" the anchor's k proxy-nearest (the batch's ``positive`` mask):

- Eq. 2, ½·max(0, m − φ_aᵀθ_i + φ_aᵀθ_j): the image query retrieves the relevant texts;
- Eq. 3, ½·max(0, m − θ_aᵀφ_i + θ_aᵀφ_j): the query's text retrieves the relevant images.

Each (anchor, relevant) pair keeps its ``per_pair`` hardest irrelevant members, as their mining does. The tower
lives in the row's criterion, so the optimiser, the checkpoint and a resume take it with the loss's own parameters.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F

from embedder.losses.g17 import half_hinge, pair_hinges
from joint.tfidf_text import TfidfTextEncoder, scipy_to_torch


class TextSide(torch.nn.Module):
    def __init__(self, cfg, bags, embed_dim: int):
        super().__init__()
        self.cfg, self.bags = cfg, bags.tocsr()  # [N, V] the training set's l2-normalised tf-idf rows
        self.tower = TfidfTextEncoder(self.bags.shape[1], embed_dim)

    def texts(self, items: torch.Tensor, device) -> torch.Tensor:
        """[B, D] θ of the batch members' bags."""
        return self.tower(scipy_to_torch(self.bags[items.cpu().numpy()]).to(device))

    def forward(self, emb: torch.Tensor, anchors: torch.Tensor, positive: torch.Tensor,
                items: torch.Tensor) -> torch.Tensor:
        c = self.cfg
        phi, theta = F.normalize(emb, dim=1), self.texts(items, emb.device)
        total = emb.sum() * 0.0
        for weight, queries, keys in ((c.eq2, phi[anchors], theta), (c.eq3, theta[anchors], phi)):
            if weight > 0:
                kept = pair_hinges(queries, keys, anchors, positive, c.margin, c.per_pair)
                total = total + weight * (kept.mean() if kept.numel() else 0.0)
        return total

    def triplets(self, emb: torch.Tensor, trip: torch.Tensor, items: torch.Tensor) -> torch.Tensor:
        """Eq. 2 and 3 on given triplets (rows of ``emb``, ``items`` the rows' training indices), weighted."""
        c = self.cfg
        phi, theta = F.normalize(emb, dim=1), self.texts(items, emb.device)
        q, p, n = trip[:, 0], trip[:, 1], trip[:, 2]
        return (c.eq2 * half_hinge(phi[q], theta[p], theta[n], c.margin).mean()
                + c.eq3 * half_hinge(theta[q], phi[p], phi[n], c.margin).mean())
