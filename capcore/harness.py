"""What every training loop shares about being stopped: the simulated kill of ``train.stop_after_steps``.

Kill-and-resume tests stop a run after a given step as a kill would (nothing after the last checkpoint
survives). A loop asks :func:`asked_to_stop` after each step and then raises :class:`StopRequested`
(after whatever it must finish first, e.g. waiting for the other processes); the exception unwinds to the
command line (``capcore.errors.run_cli``), which exits with status 3 at once, without cleanup or final
files, so the production loop holds no exit of its own.
"""
from __future__ import annotations


class StopRequested(Exception):
    """Raised after ``train.stop_after_steps`` (``run_cli`` turns it into an abrupt exit, like a kill)."""


def asked_to_stop(step: int, stop_after: int | None, total: int | None = None) -> bool:
    """True once ``step`` reaches ``stop_after`` (None: never), unless the run is already over."""
    return stop_after is not None and step >= stop_after and (total is None or step < total)
