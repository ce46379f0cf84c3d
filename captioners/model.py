"""The captioner: word embedding + attention-feature embedding + fc embedding + core + logit layer.

Word id 0 is both the start input (BOS) and the end/pad output (EOS), as in self-critical.pytorch, so
the vocabulary layer has V + 1 entries. Decoders only use ``encode``, ``init_state``, ``select_state``
and ``step``, whatever the core (captioners/cores.py says what a core provides). The fc embedding exists
only for cores that read the global feature (Top-Down), the attention's projection only for the cores
whose additive attention uses it (the LSTMs); Att2all2, as in Rennie et al., sees the image through
attention alone, and an unused layer would only sit in the checkpoint.
"""
from __future__ import annotations

from dataclasses import dataclass

import torch
import torch.nn.functional as F
from torch import nn

from capcore.checkpoint import load_checkpoint
from capcore.errors import CapawareError
from captioners.card import CaptionerCard
from captioners.core_registry import core_entry


@dataclass
class Encoded:
    """Per-image tensors computed once, then reused at every step (batch dimension first)."""
    fc: torch.Tensor | None  # [N, H] (cores that read the global feature)
    att: torch.Tensor  # [N, L, H] (after the core's encode_grid)
    memory: torch.Tensor  # what the core's attention computes from att once per image: [N, L, A] the additive
    # attention's projection (the LSTM cores), [N, layers, 2, L, H] each decoder layer's keys and values (Transformer)

    def index(self, idx: torch.Tensor) -> "Encoded":
        return Encoded(None if self.fc is None else self.fc[idx], self.att[idx], self.memory[idx])

    def repeat(self, k: int) -> "Encoded":
        """Each image k times in a row (its k captions, or its k beams)."""
        if k == 1:
            return self
        rep = lambda x: None if x is None else x.repeat_interleave(k, dim=0)  # noqa: E731
        return Encoded(rep(self.fc), rep(self.att), rep(self.memory))


MOVED = {"ctx2att.": "core.ctx2att."}
"""Weights that moved, old name -> new (issue #48: the LSTM cores own their ``ctx2att``)."""


def moved_keys(module: nn.Module, state_dict: dict, prefix: str, *args) -> None:
    """A ``load_state_dict`` pre-hook: the weights of files written before a move, under their new names, so
    every old ``.pt`` and ``.capaware`` file still loads (and strict loading still catches a real mismatch)."""
    for old, new in MOVED.items():
        for key in [k for k in state_dict if k.startswith(prefix + old)]:
            state_dict[prefix + new + key[len(prefix + old):]] = state_dict.pop(key)


class Captioner(nn.Module):
    def __init__(self, core: str, vocab_size: int, fc_feat_size: int, att_feat_size: int,
                 input_encoding_size: int = 512, rnn_size: int = 512, att_hid_size: int = 512,
                 drop_prob_lm: float = 0.5, att_cells: int = 0, core_args: dict | None = None,
                 standardise: bool = False):
        """``core_args``: settings of the core's own (the Transformer's layers, heads, ff_size). ``standardise``:
        the features are standardised per channel with the train split's statistics (``set_input_stats``), kept
        as buffers, so they are saved with the weights and applied wherever the model reads features."""
        super().__init__()
        self.args = dict(core=core, vocab_size=vocab_size, fc_feat_size=fc_feat_size, att_feat_size=att_feat_size,
                         input_encoding_size=input_encoding_size, rnn_size=rnn_size, att_hid_size=att_hid_size,
                         drop_prob_lm=drop_prob_lm, **({"att_cells": att_cells} if att_cells else {}),
                         **({"core_args": dict(core_args)} if core_args else {}),
                         **({"standardise": True} if standardise else {}))
        self.standardise = standardise
        if standardise:  # identity until set_input_stats; every checkpoint of such a model holds its statistics
            for name, size in (("fc", fc_feat_size), ("att", att_feat_size)):
                self.register_buffer(f"{name}_mean", torch.zeros(size))
                self.register_buffer(f"{name}_std", torch.ones(size))
        self.vocab_size, self.rnn_size = vocab_size, rnn_size
        self.core = core_entry(core).core_class()(input_encoding_size, rnn_size, att_hid_size, drop_prob_lm,
                                                  **(core_args or {}))
        self.embed = nn.Sequential(nn.Embedding(vocab_size + 1, input_encoding_size), nn.ReLU(),
                                   nn.Dropout(drop_prob_lm))
        self.fc_embed = (nn.Sequential(nn.Linear(fc_feat_size, rnn_size), nn.ReLU(), nn.Dropout(drop_prob_lm))
                         if self.core.uses_fc else None)
        self.att_embed = nn.Sequential(nn.Linear(att_feat_size, rnn_size), nn.ReLU(), nn.Dropout(drop_prob_lm))
        # att_cells > 0: a learned vector per grid cell, added to its embedded feature (model.att_position), so that
        # the attention knows where each cell is; zero-initialised, so training starts from the plain model
        self.att_pos = nn.Parameter(torch.zeros(att_cells, rnn_size)) if att_cells else None
        self.core.build_grid_memory(rnn_size, att_hid_size)  # here, not first: weights drawn in their old order
        self.logit = nn.Linear(rnn_size, vocab_size + 1)
        self.register_load_state_dict_pre_hook(moved_keys)

    def parameters_in_file_order(self) -> list[nn.Parameter]:
        """The parameters in the order Adam's saved states count them: an LSTM core's ``ctx2att`` where the
        captioner held it before it moved into the core (just before ``logit``), so that the optimizer state in a
        file written before (a ``last.pt`` to resume, an XE ``best.pt`` that SCST starts from) still lines up."""
        moved = [p for name, p in self.named_parameters() if name.startswith("core.ctx2att.")]
        rest = [(name, p) for name, p in self.named_parameters() if not name.startswith("core.ctx2att.")]
        at = next(i for i, (name, _) in enumerate(rest) if name.startswith("logit."))
        return [p for _, p in rest[:at]] + moved + [p for _, p in rest[at:]]

    def set_input_stats(self, fc_mean, fc_std, att_mean, att_std) -> None:
        """The train split's per-channel statistics (feature_extract.stats.channel_stats)."""
        for name, value in (("fc_mean", fc_mean), ("fc_std", fc_std), ("att_mean", att_mean), ("att_std", att_std)):
            getattr(self, name).copy_(torch.as_tensor(value, dtype=torch.float32))

    def encode(self, fc: torch.Tensor, att: torch.Tensor) -> Encoded:
        if self.standardise:
            fc, att = (fc - self.fc_mean) / self.fc_std, (att - self.att_mean) / self.att_std
        att = self.att_embed(att)
        if self.att_pos is not None:
            if att.shape[1] != self.att_pos.shape[0]:
                raise CapawareError("features", f"{att.shape[1]} grid cells, but the captioner learned positions for "
                                    f"{self.att_pos.shape[0]}", "use features of the grid it was trained on")
            att = att + self.att_pos
        att = self.core.encode_grid(att)
        return Encoded(self.fc_embed(fc) if self.fc_embed is not None else None, att, self.core.grid_memory(att))

    def init_state(self, n: int):
        """The core's state before the first word, for ``n`` rows (a decoder never looks inside it)."""
        return self.core.init_state(n, self.logit.weight)

    def select_state(self, state, rows: torch.Tensor):
        """The state of rows ``rows`` of the batch (beam search reorders and expands hypotheses with it)."""
        return self.core.select_state(state, rows)

    def step(self, words: torch.Tensor, enc: Encoded, state):
        """One word in for every row -> (log-probabilities [N, V+1], new state, attention [N, L])."""
        out, state, alpha = self.core(self.embed(words), enc, state)
        return F.log_softmax(self.logit(out), dim=-1), state, alpha

    def forward(self, fc: torch.Tensor, att: torch.Tensor, seq: torch.Tensor, ss_prob: float = 0.0) -> torch.Tensor:
        """Teacher forcing. ``seq`` [B, K, T] (K captions per image) -> log-probs [B*K, T+1, V+1].

        Step t reads word t-1 (BOS at t=0) and predicts word t (EOS = 0 after the last). With scheduled
        sampling, a fraction ``ss_prob`` of the inputs is instead drawn from the model's own previous
        prediction. Steps after every caption has ended are skipped (left zero; the loss masks them).
        """
        B, K, T = seq.shape
        seq = seq.reshape(B * K, T)
        enc = self.encode(fc, att).repeat(K)
        if ss_prob == 0.0 and self.core.steps_at_once:  # every step at once (the Transformer)
            words = torch.cat([seq.new_zeros(B * K, 1), seq], dim=1)  # BOS, then each word as the next input
            return F.log_softmax(self.logit(self.core.teacher_forced(self.embed(words), enc)), dim=-1)
        state = self.init_state(B * K)
        outs: list[torch.Tensor] = []
        words = seq.new_zeros(B * K)
        for t in range(T + 1):
            if t > 0:
                if not seq[:, t - 1].any():
                    break
                words = seq[:, t - 1].clone()
                if ss_prob > 0.0:
                    swap = torch.rand(B * K, device=seq.device) < ss_prob
                    if swap.any():
                        words[swap] = torch.multinomial(outs[-1][swap].detach().exp(), 1).squeeze(1)
            logp, state, _ = self.step(words, enc, state)
            outs.append(logp)
        out = torch.stack(outs, dim=1)
        return F.pad(out, (0, 0, 0, T + 1 - out.size(1)))


def caption_mask(seq: torch.Tensor) -> torch.Tensor:
    """[N, T] word ids -> [N, T+1] bool: the words and the one EOS after them."""
    lengths = (seq > 0).sum(1, keepdim=True)
    return torch.arange(seq.size(1) + 1, device=seq.device).unsqueeze(0) <= lengths


def xe_loss(logprobs: torch.Tensor, seq: torch.Tensor, label_smoothing: float = 0.0) -> torch.Tensor:
    """Masked cross-entropy per word (mean over words), optionally label-smoothed over the vocabulary."""
    target = torch.cat([seq, seq.new_zeros(seq.size(0), 1)], dim=1)
    mask = caption_mask(seq).to(logprobs.dtype)
    nll = -logprobs.gather(2, target.unsqueeze(-1)).squeeze(-1)
    if label_smoothing > 0.0:
        nll = (1.0 - label_smoothing) * nll - label_smoothing * logprobs.mean(-1)
    return (nll * mask).sum() / mask.sum()


def build_captioner(args: dict) -> Captioner:
    return Captioner(**args)


def load_captioner(path, device: torch.device | str = "cpu") -> tuple[Captioner, CaptionerCard]:
    """A trained captioner from ``best.pt`` (or ``last.pt``), in eval mode, and its card."""
    ckpt = load_checkpoint(path)
    card = CaptionerCard.of(ckpt, path)
    if "model" not in ckpt:
        raise CapawareError(path, "captioner checkpoint without weights", "pass the best.pt of a finished run")
    model = build_captioner(dict(card.model_args))
    model.load_state_dict(ckpt["model"])
    return model.to(device).eval(), card
