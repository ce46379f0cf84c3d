"""A Transformer captioner core (Vaswani et al. 2017, as self-critical.pytorch's ``transformer``): an
encoder over the attention grid and a masked decoder over the words so far.

It plugs into the captioner and the decoders through the core interface of ``captioners.cores``:

- ``encode_grid`` runs the encoder once per image over the embedded grid cells (no positions, as in
  self-critical.pytorch: a cell's place reaches the encoder only through ``model.att_position``);
- one decoding step runs every decoder layer on the newest word alone. Its self-attention reads the
  layer's normalised inputs at every earlier step, which the state keeps (one ``[N, t, H]`` tensor per
  layer), so a caption of T words costs T one-word steps rather than T re-runs of its prefix;
- ``teacher_forced`` runs all steps of known captions at once under a causal mask (XE training). It
  computes what the steps compute, in a different order (a test holds the two together);
- ``alpha`` is the last layer's attention over the grid, averaged over its heads: what the attention
  maps and the grounding checks read.

Layers are pre-norm (LayerNorm before each sublayer, a final LayerNorm after the stack), which trains
without the warm-up schedule a post-norm stack needs; word positions are sinusoidal.
"""
from __future__ import annotations

import math

import torch
from torch import nn


def sinusoid(length: int, size: int) -> torch.Tensor:
    """[length, size] positional encodings: sin on even channels, cos on odd ones, wavelengths up to 1e4."""
    position = torch.arange(length, dtype=torch.float32).unsqueeze(1)
    rate = torch.exp(torch.arange(0, size, 2, dtype=torch.float32) * (-math.log(10000.0) / size))
    table = torch.zeros(length, size)
    table[:, 0::2] = torch.sin(position * rate)
    table[:, 1::2] = torch.cos(position * rate)[:, : size // 2]
    return table


class DecoderLayer(nn.Module):
    """Masked self-attention over the words so far, attention over the grid, feed-forward; pre-norm."""

    def __init__(self, size: int, heads: int, ff_size: int, dropout: float):
        super().__init__()
        self.self_attn = nn.MultiheadAttention(size, heads, dropout=dropout, batch_first=True)
        self.grid_attn = nn.MultiheadAttention(size, heads, dropout=dropout, batch_first=True)
        self.ff = nn.Sequential(nn.Linear(size, ff_size), nn.ReLU(), nn.Dropout(dropout), nn.Linear(ff_size, size))
        self.norms = nn.ModuleList(nn.LayerNorm(size) for _ in range(3))
        self.dropout = nn.Dropout(dropout)

    def forward(self, x, seen, memory, causal=None):
        """x [N, t, H] the new positions; seen [N, s, H] the normalised inputs of every position up to the
        newest (x's own included); ``causal`` [t, s] masks later positions when t > 1."""
        q = self.norms[0](x)
        x = x + self.dropout(self.self_attn(q, seen, seen, attn_mask=causal, need_weights=False)[0])
        attended, alpha = self.grid_attn(self.norms[1](x), memory, memory, need_weights=True)
        x = x + self.dropout(attended)
        return x + self.dropout(self.ff(self.norms[2](x))), alpha


class TransformerCore(nn.Module):
    uses_fc = False
    uses_p_att = False

    def __init__(self, input_encoding_size: int, rnn_size: int, att_hid_size: int, drop_prob_lm: float,
                 layers: int = 2, heads: int = 4, ff_size: int = 512, max_positions: int = 64):
        super().__init__()
        size = rnn_size
        self.encoder = nn.TransformerEncoder(
            nn.TransformerEncoderLayer(size, heads, ff_size, drop_prob_lm, batch_first=True, norm_first=True),
            layers, norm=nn.LayerNorm(size), enable_nested_tensor=False)
        self.word_in = nn.Linear(input_encoding_size, size)
        self.register_buffer("positions", sinusoid(max_positions, size), persistent=False)
        self.decoder = nn.ModuleList(DecoderLayer(size, heads, ff_size, drop_prob_lm) for _ in range(layers))
        self.norm = nn.LayerNorm(size)
        self.dropout = nn.Dropout(drop_prob_lm)

    def encode_grid(self, att: torch.Tensor) -> torch.Tensor:
        return self.encoder(att)

    def init_state(self, n: int, like: torch.Tensor) -> tuple[torch.Tensor, ...]:
        return tuple(like.new_zeros(n, 0, self.word_in.out_features) for _ in self.decoder)

    def select_state(self, state, rows: torch.Tensor):
        return tuple(s[rows] for s in state)

    def inputs(self, xt: torch.Tensor, start: int) -> torch.Tensor:
        """Words [N, t, E] at positions start.. -> decoder inputs [N, t, H]."""
        return self.word_in(xt) + self.positions[start:start + xt.size(1)]

    def forward(self, xt, enc, state):
        x = self.inputs(xt.unsqueeze(1), state[0].size(1))
        seen = []
        for layer, past in zip(self.decoder, state):
            seen.append(torch.cat([past, layer.norms[0](x)], dim=1))
            x, alpha = layer(x, seen[-1], enc.att)
        return self.dropout(self.norm(x.squeeze(1))), tuple(seen), alpha.squeeze(1)

    def teacher_forced(self, xt: torch.Tensor, enc) -> torch.Tensor:
        x = self.inputs(xt, 0)
        T = x.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # True: may not attend
        for layer in self.decoder:
            x, _ = layer(x, layer.norms[0](x), enc.att, causal)
        return self.dropout(self.norm(x))
