"""The one exception type of capaware.

Every message names the file (or key), what is wrong with it, and how to fix it, so that the CLI can
print it on one line and exit non-zero instead of dumping a traceback at a user.
"""
from __future__ import annotations

import os
import sys
from pathlib import Path


class StopRequested(Exception):
    """Raised after ``train.stop_after_steps`` (capcore.harness): ``run_cli`` turns it into an abrupt exit,
    like a kill."""


class CapawareError(Exception):
    """A user-facing error: bad input file, bad config, missing weights."""

    def __init__(self, where: str | Path, problem: str, fix: str | None = None):
        self.where, self.problem, self.fix = str(where), problem, fix
        text = f"{where}: {problem}"
        if fix:
            text += f" (fix: {fix})"
        super().__init__(text)


def run_cli(main) -> None:
    """Call ``main()``; turn a CapawareError into one line on stderr and exit status 2, and a simulated
    kill (``capcore.harness.StopRequested``, train.stop_after_steps) into an immediate exit 3."""
    try:
        main()
    except CapawareError as err:
        print(f"\nerror: {err}", file=sys.stderr)
        raise SystemExit(2) from None
    except StopRequested:
        sys.stdout.flush()
        os._exit(3)  # like a kill: no cleanup, no final files
