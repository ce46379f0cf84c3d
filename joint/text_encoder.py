"""The text side of the joint space: a caption's word ids -> one l2-normalised vector (vsepp's ``EncoderText``).

It reads the captioners' own ids, so a caption sampled by a captioner is encoded as it comes out of the decoder,
with no vocabulary of its own to translate to. The id conventions are those of ``labels.h5``
(``captioners/prepro.py``): words are ``1..V`` (``V`` is the file's ``vocab_size`` attribute, UNK the last of
them), and ``0`` is both padding and the end of a caption. A caption is its ids up to the first 0; whatever follows
(more zeros in ``labels.h5``, anything at all in a sampled sequence after its end) is never read. The GRU's state
is taken at each caption's true length, by packing the batch, not at the padded end: a caption padded to 16 or to
30 is the same vector.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn
from torch.nn.utils.rnn import pack_padded_sequence

PAD = 0
"""Pad and end of caption, as in ``labels.h5``; the embedding's row 0 stays zero and gets no gradient."""


def caption_lengths(ids: torch.Tensor) -> torch.Tensor:
    """[B, T] word ids -> [B] int64 lengths: the tokens before each row's first 0 (T where there is none)."""
    ended = (ids == PAD).long().cumsum(1) > 0
    return (~ended).sum(1)


class TextEncoder(nn.Module):
    """Embedding (``vocab_size + 1`` rows, 0 the pad), GRU, last state at the true length, l2 norm.

    An empty caption (a 0 first, as a sampler may emit) is read as one pad token: its vector is the GRU's answer to
    a zero input, the same for every empty caption, so it ranks any image alike and earns no retrieval.
    """

    def __init__(self, vocab_size: int, word_dim: int, embed_dim: int, num_layers: int = 1):
        super().__init__()
        self.vocab_size = vocab_size
        self.embed = nn.Embedding(vocab_size + 1, word_dim, padding_idx=PAD)
        self.rnn = nn.GRU(word_dim, embed_dim, num_layers, batch_first=True)
        with torch.no_grad():  # vsepp's initialisation of the word vectors, the pad row kept at zero
            self.embed.weight.uniform_(-0.1, 0.1)
            self.embed.weight[PAD].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        """[B, T] LongTensor of word ids (0 after the end) -> [B, embed_dim], each row of unit length."""
        if ids.dim() != 2:
            raise ValueError(f"caption ids must be [batch, length], got shape {tuple(ids.shape)}")
        lengths = caption_lengths(ids).clamp(min=1).cpu()
        packed = pack_padded_sequence(self.embed(ids.long()), lengths, batch_first=True, enforce_sorted=False)
        _, last = self.rnn(packed)  # [num_layers, B, embed_dim]: each sequence's state at its own length
        return F.normalize(last[-1], dim=-1)
