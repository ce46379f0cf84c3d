"""Recurrent cores: one decoding step each. The captioner (captioners/model.py) and every decoder
(captioners/decoding.py) are shared; Att2all2 and Top-Down differ only here.

A core's interface::

    core(xt [N, E], fc [N, H] | None, att [N, L, H], p_att [N, L, A], state) -> (output [N, H], state, alpha [N, L])

``state`` is a tuple ``(h, c)`` of tensors ``[layers, N, H]``, so a decoder can expand or reorder the
batch (beam search) without knowing which core it drives.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F
from torch import nn


class AdditiveAttention(nn.Module):
    """Soft attention: alpha = softmax(w^T tanh(W_a a_i + W_h h)); returns sum_i alpha_i a_i and alpha.

    ``p_att`` (= W_a a_i) is computed once per image by the captioner, not at every step.
    """

    def __init__(self, rnn_size: int, att_hid_size: int):
        super().__init__()
        self.h2att = nn.Linear(rnn_size, att_hid_size)
        self.alpha_net = nn.Linear(att_hid_size, 1)

    def forward(self, h: torch.Tensor, att: torch.Tensor, p_att: torch.Tensor) -> tuple[torch.Tensor, torch.Tensor]:
        scores = self.alpha_net(torch.tanh(p_att + self.h2att(h).unsqueeze(1))).squeeze(-1)  # [N, L]
        alpha = F.softmax(scores, dim=-1)
        return torch.bmm(alpha.unsqueeze(1), att).squeeze(1), alpha


class Att2all2Core(nn.Module):
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

    def forward(self, xt, fc, att, p_att, state):
        prev_h, prev_c = state[0][-1], state[1][-1]
        att_res, alpha = self.attention(prev_h, att, p_att)
        sums = self.i2h(xt) + self.h2h(prev_h) + self.a2h(att_res)
        H = self.rnn_size
        in_gate, forget_gate, out_gate = torch.sigmoid(sums[:, :3 * H]).chunk(3, dim=1)
        cell_in = torch.maximum(sums[:, 3 * H:4 * H], sums[:, 4 * H:])  # maxout over two pieces
        next_c = forget_gate * prev_c + in_gate * cell_in
        next_h = out_gate * torch.tanh(next_c)
        return self.dropout(next_h), (next_h.unsqueeze(0), next_c.unsqueeze(0)), alpha


class TopDownCore(nn.Module):
    """Anderson et al. 2018: an attention LSTM over [language h, mean feature, word] drives the
    attention; a language LSTM reads [attended feature, attention h]. The mean feature is the fc
    feature (the backbone's global average pool, i.e. the mean of the att grid before embedding)."""

    layers = 2
    uses_fc = True

    def __init__(self, input_encoding_size: int, rnn_size: int, att_hid_size: int, drop_prob_lm: float):
        super().__init__()
        self.att_lstm = nn.LSTMCell(input_encoding_size + 2 * rnn_size, rnn_size)
        self.lang_lstm = nn.LSTMCell(2 * rnn_size, rnn_size)
        self.attention = AdditiveAttention(rnn_size, att_hid_size)
        self.dropout = nn.Dropout(drop_prob_lm)

    def forward(self, xt, fc, att, p_att, state):
        h, c = state
        h_att, c_att = self.att_lstm(torch.cat([h[1], fc, xt], dim=1), (h[0], c[0]))
        att_res, alpha = self.attention(h_att, att, p_att)
        h_lang, c_lang = self.lang_lstm(torch.cat([att_res, h_att], dim=1), (h[1], c[1]))
        state = (torch.stack([h_att, h_lang]), torch.stack([c_att, c_lang]))
        return self.dropout(h_lang), state, alpha


CORES = {"att2all2": Att2all2Core, "topdown": TopDownCore}
