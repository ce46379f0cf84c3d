"""What every captioner core is: the interface the captioner (captioners/model.py) and every decoder
(captioners/decoding.py) know of it, as one abstract base, so a core says what it can do in its class, and
nothing asks with ``hasattr``. The interface is described in captioners/cores.py's docstring."""
from __future__ import annotations

from abc import ABCMeta, abstractmethod

import torch
from torch import nn


class CaptionCore(nn.Module, metaclass=ABCMeta):
    """A captioner core. ``steps_at_once``: ``teacher_forced`` computes every step of teacher forcing in one
    call (causal), which the captioner then uses instead of the word-by-word loop."""

    uses_fc: bool
    steps_at_once: bool = False

    def encode_grid(self, att: torch.Tensor) -> torch.Tensor:
        return att

    def build_grid_memory(self, rnn_size: int, att_hid_size: int) -> None:
        """Create the modules ``grid_memory`` uses, if they are not made in ``__init__``. The captioner calls this
        after its own embeddings, where it used to make the LSTMs' ``ctx2att`` itself, so that weights are drawn
        in the same order as before and a seed trains the same captioner it did (old files load through
        ``Captioner``'s key remap)."""

    @abstractmethod
    def grid_memory(self, att: torch.Tensor) -> torch.Tensor:
        """What the core's attention computes from the encoded grid once per image (``Encoded.memory``)."""

    @abstractmethod
    def init_state(self, n: int, like: torch.Tensor): ...

    @abstractmethod
    def select_state(self, state, rows: torch.Tensor): ...

    @abstractmethod
    def forward(self, xt: torch.Tensor, enc, state): ...

    def teacher_forced(self, xt: torch.Tensor, enc) -> torch.Tensor:
        raise NotImplementedError(f"{type(self).__name__} steps one word at a time (steps_at_once is False)")
