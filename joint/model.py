"""``JointSpace``: the two encoders of the joint space, and the similarity of every image to every caption.

The self-retrieval reward, the joint stage's training and the retrieval evaluation all start from the same
``[images, captions]`` cosine matrix, so it is computed in one place. ``args`` holds what rebuilds the model, for
its checkpoint (as ``captioners.model`` keeps its own).
"""
from __future__ import annotations

import torch
from torch import nn

from joint.image_encoder import ImageEncoder
from joint.text_encoder import TextEncoder


class JointSpace(nn.Module):
    """Defaults are vsepp's (a 1024-d space, 300-d word vectors, one GRU layer)."""

    def __init__(self, vocab_size: int, feat_dim: int, embed_dim: int = 1024, word_dim: int = 300,
                 source: str = "fc", num_layers: int = 1):
        super().__init__()
        self.args = dict(vocab_size=vocab_size, feat_dim=feat_dim, embed_dim=embed_dim, word_dim=word_dim,
                         source=source, num_layers=num_layers)
        self.text = TextEncoder(vocab_size, word_dim, embed_dim, num_layers)
        self.image = ImageEncoder(feat_dim, embed_dim, source)

    def embed_images(self, feats: torch.Tensor) -> torch.Tensor:
        return self.image(feats)

    def embed_captions(self, ids: torch.Tensor) -> torch.Tensor:
        return self.text(ids)

    def forward(self, feats: torch.Tensor, ids: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """(image embeddings, caption embeddings): what the losses take, row i of each a positive pair."""
        return self.embed_images(feats), self.embed_captions(ids)

    def similarity(self, img_feats: torch.Tensor, ids: torch.Tensor) -> torch.Tensor:
        """[I, T]: the cosine of image i's embedding and caption j's."""
        img, txt = self(img_feats, ids)
        return img @ txt.t()
