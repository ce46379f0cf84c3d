"""Captioner cores: what turns the words so far and the image into the next word's features. The
captioner (captioners/model.py) and every decoder (captioners/decoding.py) are shared; Att2all2, Top-Down
and the Transformer (captioners/transformer_core.py) differ only here; ``captioners.core_registry`` names them.

A core's interface, which is all the captioner and the decoders know of it::

    core.uses_fc                         whether it reads the fc feature
    core.encode_grid(att [N, L, H]) -> att [N, L, H]     once per image (the Transformer's encoder; else as is)
    core.grid_memory(att) -> memory      what its attention needs of the grid, once per image (``Encoded.memory``:
                                         the LSTMs' additive-attention projection ``ctx2att``, the Transformer's
                                         keys and values per layer)
    core.init_state(n, like) -> state    the state before the first word (``like``: a tensor of the dtype
                                         and device to use)
    core.select_state(state, rows) -> state              the state of batch rows ``rows`` (a LongTensor):
                                                         beam search reorders and expands the batch with it
    core(xt [N, E], enc: Encoded, state) -> (output [N, H], state, alpha [N, L])   one word
    core.teacher_forced(x [N, T, E], enc) -> output [N, T, H]   every step at once (causal), where the class
                                         says ``steps_at_once``

Every core is a ``captioners.core_base.CaptionCore``; ``captioners.core_registry`` names them.

So a decoder never looks inside a state. An LSTM core's state is ``(h, c)`` of ``[layers, N, H]``; the
Transformer's is what each of its layers has seen so far.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn

from captioners.core_base import CaptionCore


class AdditiveAttention(nn.Module):
    """Soft attention: alpha = softmax(w^T tanh(W_a a_i + W_h h)); returns sum_i alpha_i a_i and alpha.

    ``p_att`` (= W_a a_i) is computed once per image (the LSTM core's ``grid_memory``), not at every step.
    """

    def __init__(self, rnn_size: int, att_hid_size: int):
        super().__init__()
        self.h2att = nn.Linear(rnn_size, att_hid_size)
        self.alpha_net = nn.Linear(att_hid_size, 1)

    def forward(self, h: torch.Tensor, att: torch.Tensor, p_att: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.alpha_net(torch.tanh(p_att + self.h2att(h).unsqueeze(1))).squeeze(-1)  # [N, L]
        alpha = F.softmax(scores, dim=-1)
        return torch.bmm(alpha.unsqueeze(1), att).squeeze(1), alpha


class LSTMCore(CaptionCore):
    """What the LSTM cores share: the state ``(h, c)`` of ``[layers, N, H]`` tensors, batch in dim 1."""

    layers: int
    rnn_size: int

    def build_grid_memory(self, rnn_size: int, att_hid_size: int) -> None:
        self.ctx2att = nn.Linear(rnn_size, att_hid_size)  # W_a of the additive attention, applied once per image

    def grid_memory(self, att: torch.Tensor) -> torch.Tensor:
        return self.ctx2att(att)

    def init_state(self, n: int, like: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        zeros = like.new_zeros(self.layers, n, self.rnn_size)
        return zeros, zeros.clone()

    def select_state(self, state, rows: torch.Tensor):
        return tuple(s[:, rows] for s in state)


class Att2all2Core(LSTMCore):
    """Rennie et al. 2017 (Att2all): one LSTM whose three gates and maxout cell input all see the
    attended feature, computed from the previous hidden state. The fc feature is not used."""

    layers = 1
    uses_fc = False

    def __init__(self, input_encoding_size: int, rnn_size: int, att_hid_size: int, drop_prob_lm: float):
        super().__init__()
        self.rnn_size = rnn_size
        self.i2h = nn.Linear(input_encoding_size, 5 * rnn_size)
        self.h2h = nn.Linear(rnn_size, 5 * rnn_size)
        self.a2h = nn.Linear(rnn_size, 5 * rnn_size)
        self.attention = AdditiveAttention(rnn_size, att_hid_size)
        self.dropout = nn.Dropout(drop_prob_lm)

    def forward(self, xt, enc, state):
        prev_h, prev_c = state[0][-1], state[1][-1]
        att_res, alpha = self.attention(prev_h, enc.att, enc.memory)
        sums = self.i2h(xt) + self.h2h(prev_h) + self.a2h(att_res)
        H = self.rnn_size
        in_gate, forget_gate, out_gate = torch.sigmoid(sums[:, :3 * H]).chunk(3, dim=1)
        cell_in = torch.maximum(sums[:, 3 * H:4 * H], sums[:, 4 * H:])  # maxout over two pieces
        next_c = forget_gate * prev_c + in_gate * cell_in
        next_h = out_gate * torch.tanh(next_c)
        return self.dropout(next_h), (next_h.unsqueeze(0), next_c.unsqueeze(0)), alpha


class TopDownCore(LSTMCore):
    """Anderson et al. 2018: an attention LSTM over [language h, mean feature, word] drives the
    attention; a language LSTM reads [attended feature, attention h]. The mean feature is the fc
    feature (the backbone's global average pool, i.e. the mean of the att grid before embedding)."""

    layers = 2
    uses_fc = True

    def __init__(self, input_encoding_size: int, rnn_size: int, att_hid_size: int, drop_prob_lm: float):
        super().__init__()
        self.rnn_size = rnn_size
        self.att_lstm = nn.LSTMCell(input_encoding_size + 2 * rnn_size, rnn_size)
        self.lang_lstm = nn.LSTMCell(2 * rnn_size, rnn_size)
        self.attention = AdditiveAttention(rnn_size, att_hid_size)
        self.dropout = nn.Dropout(drop_prob_lm)

    def forward(self, xt, enc, state):
        h, c = state
        h_att, c_att = self.att_lstm(torch.cat([h[1], enc.fc, xt], dim=1), (h[0], c[0]))
        att_res, alpha = self.attention(h_att, enc.att, enc.memory)
        h_lang, c_lang = self.lang_lstm(torch.cat([att_res, h_att], dim=1), (h[1], c[1]))
        state = (torch.stack([h_att, h_lang]), torch.stack([c_att, c_lang]))
        return self.dropout(h_lang), state, alpha

