"""What every training loop shares about being stopped: the simulated kill of ``train.stop_after_steps``.

Kill-and-resume tests stop a run after a given step as a kill would (nothing after the last checkpoint
survives). A loop only calls :func:`stop_if_asked` after each step; the exception unwinds to the command
line (``capcore.errors.run_cli``), which exits with status 3 at once, without cleanup or final files,
so the production loop holds no exit of its own.
"""
from __future__ import annotations


class StopRequested(Exception):
    """Raised after ``train.stop_after_steps`` (``run_cli`` turns it into an abrupt exit, like a kill)."""


def stop_if_asked(step: int, stop_after: int | None, total: int | None = None) -> None:
    """Raise StopRequested once ``step`` reaches ``stop_after`` (and the run is not already over)."""
    if stop_after is not None and step >= stop_after and (total is None or step < total):
        raise StopRequested(step)
