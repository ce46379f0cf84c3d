"""What every training loop shares about being stopped and resumed: the simulated kill of
``train.stop_after_steps`` and the resumable ``last.pt``.

Kill-and-resume tests stop a run after a given step as a kill would (nothing after the last checkpoint
survives). A loop asks :func:`asked_to_stop` after each step and then raises :class:`StopRequested`
(after whatever it must finish first, e.g. waiting for the other processes); the exception unwinds to the
command line (``capcore.errors.run_cli``), which exits with status 3 at once, without cleanup or final
files, so the production loop holds no exit of its own.

:class:`LoopCheckpoint` is the one way a loop (stage one, class pretraining, captioner XE and SCST)
writes and reads ``last.pt``: the states of its parts (model, optimizer, scheduler, loss), its random
generators and torch's, and its fingerprint (capcore.fingerprint), which a resume must match.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import torch

from capcore.checkpoint import load_checkpoint, save_checkpoint
from capcore.errors import CapawareError, StopRequested

__all__ = ["StopRequested", "asked_to_stop", "LoopCheckpoint"]


def asked_to_stop(step: int, stop_after: int | None, total: int | None = None) -> bool:
    """True once ``step`` reaches ``stop_after`` (None: never), unless the run is already over."""
    return stop_after is not None and step >= stop_after and (total is None or step < total)


@dataclass
class LoopCheckpoint:
    """A loop's resumable state: ``parts`` (anything with ``state_dict``/``load_state_dict``) and ``rngs``
    (``torch.Generator``s) under their names, torch's global RNG (and CUDA's), and the fingerprint."""
    path: Path
    fingerprint: str
    parts: dict[str, Any]
    rngs: dict[str, torch.Generator] = field(default_factory=dict)
    other: str = "another config"  # what a checkpoint with another fingerprint belongs to, for the error

    def load(self, device: torch.device) -> dict | None:
        """Restore every part and generator from ``path`` and return the whole state (the loop reads its
        own fields: step, history...); None when there is nothing to resume."""
        if not self.path.is_file():
            return None
        state = load_checkpoint(self.path)
        if state.get("fingerprint") != self.fingerprint:
            raise CapawareError(self.path, f"checkpoint belongs to {self.other}",
                                "delete the run folder or choose another out_dir")
        for name, part in self.parts.items():
            part.load_state_dict(state[name])
        for name, generator in self.rngs.items():
            generator.set_state(state[name])
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"])
        return state

    def save(self, fields: dict, device: torch.device, path: Path | None = None) -> None:
        """Write the parts, generators and RNG states with the loop's ``fields`` atomically (to ``path``,
        default ``self.path``: stage one writes its final model.pt the same way)."""
        state = {name: part.state_dict() for name, part in self.parts.items()}
        state.update({name: g.get_state() for name, g in self.rngs.items()})
        state.update(fields, torch_rng=torch.get_rng_state(), fingerprint=self.fingerprint)
        if device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state()
        save_checkpoint(state, path or self.path)
