"""Which image regions make two images similar (Gordo & Larlus 2017, §6.3; issue #67): the grid cells' shares of
the pair's cosine similarity in a stage-one embedding.

With a mean-pooled trunk and a linear head, an image's embedding is the mean of its cells' projections,
e = (1/n) Σ_i (W x_i + b), so the cosine of two images splits exactly over the cells of either one:
cos(a, b) = Σ_i c_i with c_i = ((W x_i + b) / n) · ê_b / ‖e_a‖, and over cell pairs with
C_ij = ((W x_i + b) / n_a) · ((W y_j + b) / n_b) / (‖e_a‖ ‖e_b‖). Each image's map is then the heat map of its
cells' shares (positive: drawn toward the other image). Their paper reads R-MAC's regions the same way; capaware's
trunks pool the mean of their last map, so its regions are the map's cells. A backbone that pools its own way
(``features_and_vector`` returns a vector) has no such split: one line says so.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch

from capcore.errors import CapawareError


@dataclass
class PairExplanation:
    cosine: float
    cells_a: torch.Tensor  # [h, w]: each cell of image a's share of the cosine (they sum to it)
    cells_b: torch.Tensor  # [h, w]: the same for image b
    pairs: torch.Tensor  # [h*w, h*w]: cell i of a with cell j of b (they sum to it too)


def cell_projections(model, image: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
    """([n, D] each cell's (W x_i + b) / n, [D] the embedding e) of one image [3, H, W]."""
    fmap, vector = model.features_and_vector(image[None])
    if vector is not None:
        raise CapawareError(type(getattr(model, "trunk", model)).__name__, "this backbone pools its own way, so "
                            "the similarity does not split over its cells",
                            "explain a stage-one run of a mean-pooled (ResNet) trunk")
    cells = fmap[0].flatten(1).t()  # [n, C]
    parts = model.head(cells) / len(cells)  # the bias, spread over the cells, sums back to b
    return parts, parts.sum(0)


@torch.no_grad()
def explain_pair(model, a: torch.Tensor, b: torch.Tensor) -> PairExplanation:
    """The cosine of two images [3, H, W] in ``model``'s embedding and its split over either image's cells."""
    model.eval()
    pa, ea = cell_projections(model, a)
    pb, eb = cell_projections(model, b)
    na, nb = ea.norm(), eb.norm()
    pairs = pa @ pb.t() / (na * nb)
    h, w = model.features_and_vector(a[None])[0].shape[-2:]
    return PairExplanation(float((ea @ eb) / (na * nb)), pairs.sum(1).reshape(h, w), pairs.sum(0).reshape(h, w),
                           pairs)
