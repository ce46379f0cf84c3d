"""The hinge arithmetic of VSE0 and VSE++ (fartashf/vsepp's ``ContrastiveLoss``), per item, on l2-normalised
embeddings.

Row i of ``img`` and row i of ``txt`` are a positive pair; every other row of the batch is a negative.
``scores[i, j]`` is the cosine of image i and caption j, so the diagonal holds the positive pairs. Two directions:

- image -> text (caption retrieval), for image i: ``[m + s(i, j) - s(i, i)]_+`` over the other captions j;
- text -> image (image retrieval), for caption j: ``[m + s(i, j) - s(j, j)]_+`` over the other images i.

VSE0 sums each direction's hinges; VSE++ keeps only the largest (the hardest negative). The text -> image term of
caption i under VSE++ is Eq. 4 of Liu et al. 2018, the retrieval loss whose negative is the self-retrieval reward:
``text_to_image_hinge`` returns it per caption, so the reward needs no loss of its own.
"""
from __future__ import annotations

import torch


def similarities(img: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
    """[B, B] cosines of l2-normalised rows: image i against caption j."""
    if img.shape != txt.shape or img.dim() != 2:
        raise ValueError(f"image and caption embeddings must both be [batch, dim], got {tuple(img.shape)} "
                         f"and {tuple(txt.shape)}")
    return img @ txt.t()


def hinge_matrices(img: torch.Tensor, txt: torch.Tensor, margin: float) -> tuple[torch.Tensor, torch.Tensor]:
    """(image -> text, text -> image) hinges, each [B, B] with the diagonal (the positives) at zero: the first's
    row i holds image i's hinges against every other caption, the second's column j caption j's against every
    other image."""
    scores = similarities(img, txt)
    positive = scores.diag()
    i2t = (margin + scores - positive[:, None]).clamp(min=0)
    t2i = (margin + scores - positive[None, :]).clamp(min=0)
    off = ~torch.eye(scores.shape[0], dtype=torch.bool, device=scores.device)
    return i2t * off, t2i * off


def per_item(img: torch.Tensor, txt: torch.Tensor, margin: float, hardest: bool) -> tuple[torch.Tensor, torch.Tensor]:
    """(image -> text of image i, text -> image of caption i), each [B]: the sum of the item's hinges (VSE0) or the
    largest (``hardest``, VSE++). A batch of one has no negative: both are zero."""
    i2t, t2i = hinge_matrices(img, txt, margin)
    if hardest:
        return i2t.max(1).values, t2i.max(0).values
    return i2t.sum(1), t2i.sum(0)


def caption_hinges(images: torch.Tensor, captions: torch.Tensor, owner: torch.Tensor, margin: float = 0.2,
                   hardest: bool = True) -> torch.Tensor:
    """[M]: each caption's text -> image hinges against every image but its own, the largest (``hardest``: Liu et
    al. 2018, Eq. 4) or their sum (VSE0). ``images`` [I, D] and ``captions`` [M, D] are l2-normalised;
    ``owner`` [M] is each caption's image row. Unlike :func:`per_item`, captions and images need not pair one to
    one: an SCST batch has several sampled captions per image, and images (unlabeled ones) that own none."""
    if images.dim() != 2 or captions.dim() != 2 or images.shape[1] != captions.shape[1]:
        raise ValueError(f"image and caption embeddings must be [rows, dim] of one width, got {tuple(images.shape)} "
                         f"and {tuple(captions.shape)}")
    owner = torch.as_tensor(owner, dtype=torch.long, device=captions.device).reshape(-1, 1)
    scores = captions @ images.t()  # [M, I]: caption k against image i
    h = (margin + scores - scores.gather(1, owner)).clamp(min=0)
    h = h.scatter(1, owner, 0.0)  # its own image is no negative
    return h.max(1).values if hardest else h.sum(1)


def text_to_image_hinge(img: torch.Tensor, txt: torch.Tensor, margin: float = 0.2) -> torch.Tensor:
    """[B]: caption i's hardest-negative hinge against the other images of its batch,
    ``max_{j != i} [m - s(c_i, v_i) + s(c_i, v_j)]_+`` (Liu et al. 2018, Eq. 4). Zero when caption i is closer to
    its own image than to any other by the margin; up to ``2 + m`` when it is far from its own and on another."""
    return per_item(img, txt, margin, hardest=True)[1]
