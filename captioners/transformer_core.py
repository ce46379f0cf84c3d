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
  maps and the grounding checks read;
- each decoder layer's keys and values of the grid are projected once per image (``grid_memory``, kept
  in ``Encoded.memory``), not at every word: at self-critical.pytorch's sizes (6 layers, 196 cells of
  width 512) re-projecting them made every decoding step cost as much as the rest of the step twenty
  times over (benchmarks/bench_captioners.py).

Layers are pre-norm (LayerNorm before each sublayer, a final LayerNorm after the stack), which trains
without the warm-up schedule a post-norm stack needs; word positions are sinusoidal.
"""
from __future__ import annotations

import math

import torch
import torch.nn.functional as F
from torch import nn

from captioners.core_base import CaptionCore


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

    def grid_memory(self, memory: torch.Tensor) -> torch.Tensor:
        """[N, L, H] grid -> [N, 2, L, H]: this layer's keys and values of it (once per image)."""
        w, b = self.grid_attn.in_proj_weight.chunk(3), self.grid_attn.in_proj_bias.chunk(3)
        return torch.stack([F.linear(memory, w[1], b[1]), F.linear(memory, w[2], b[2])], dim=1)

    def attend_grid(self, x: torch.Tensor, kv: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        """Multi-head attention of x [N, t, H] over the projected grid ``kv`` [N, 2, L, H], as
        ``nn.MultiheadAttention`` computes it (same parameters) -> (output [N, t, H], alpha [N, t, L] head mean)."""
        m = self.grid_attn
        heads = lambda z: z.unflatten(-1, (m.num_heads, -1)).transpose(1, 2)  # noqa: E731  [N, h, *, d]
        q = heads(F.linear(x, m.in_proj_weight.chunk(3)[0], m.in_proj_bias.chunk(3)[0]))
        k, v = heads(kv[:, 0]), heads(kv[:, 1])
        alpha = torch.softmax(q @ k.transpose(-1, -2) / math.sqrt(q.size(-1)), dim=-1)  # [N, h, t, L]
        out = F.dropout(alpha, m.dropout, self.training) @ v
        return m.out_proj(out.transpose(1, 2).flatten(2)), alpha.mean(1)

    def forward(self, x, seen, kv, causal=None):
        """x [N, t, H] the new positions; seen [N, s, H] the normalised inputs of every position up to the
        newest (x's own included); kv this layer's ``grid_memory``; ``causal`` [t, s] masks later positions."""
        q = self.norms[0](x)
        x = x + self.dropout(self.self_attn(q, seen, seen, attn_mask=causal, need_weights=False)[0])
        attended, alpha = self.attend_grid(self.norms[1](x), kv)
        x = x + self.dropout(attended)
        return x + self.dropout(self.ff(self.norms[2](x))), alpha


class TransformerCore(CaptionCore):
    """The core of ``model.core: transformer`` (module docstring); ``att_hid_size`` is accepted for the shared
    constructor and unused (it sizes the LSTMs' additive attention)."""

    uses_fc = False
    steps_at_once = True

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

    def grid_memory(self, att: torch.Tensor) -> torch.Tensor:
        """[N, L, H] encoded grid -> [N, layers, 2, L, H]: every decoder layer's keys and values of it."""
        return torch.stack([layer.grid_memory(att) for layer in self.decoder], dim=1)

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
        for i, (layer, past) in enumerate(zip(self.decoder, state)):
            seen.append(torch.cat([past, layer.norms[0](x)], dim=1))
            x, alpha = layer(x, seen[-1], enc.memory[:, i])
        return self.dropout(self.norm(x.squeeze(1))), tuple(seen), alpha.squeeze(1)

    def teacher_forced(self, xt: torch.Tensor, enc) -> torch.Tensor:
        x = self.inputs(xt, 0)
        T = x.size(1)
        causal = torch.ones(T, T, dtype=torch.bool, device=x.device).triu(1)  # True: may not attend
        for i, layer in enumerate(self.decoder):
            x, _ = layer(x, layer.norms[0](x), enc.memory[:, i], causal)
        return self.dropout(self.norm(x))
