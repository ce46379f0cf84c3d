"""The one exception type of capaware.

Every message names the file (or key), what is wrong with it, and how to fix it, so that the CLI can
print it on one line and exit non-zero instead of dumping a traceback at a user.
"""
from __future__ import annotations

import os
import sys
import traceback
from pathlib import Path

from capcore import process_exit


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
    kill (``capcore.harness.StopRequested``, train.stop_after_steps) into an immediate exit 3.

    Under torchrun, ``main`` runs inside torch's ``record`` (its traceback goes to the rank's error file,
    which the launcher's failure report reads), and a process that joined the process group ends without
    the interpreter's teardown, whatever the outcome (``capcore.process_exit`` says why)."""
    if os.environ.get("TORCHELASTIC_ERROR_FILE"):
        from torch.distributed.elastic.multiprocessing.errors import record

        main = record(main)
    try:
        main()
    except CapawareError as err:
        print(f"\nerror: {err}", file=sys.stderr)
        process_exit.finish(2)
        raise SystemExit(2) from None
    except StopRequested:
        sys.stdout.flush()
        os._exit(3)  # like a kill: no cleanup, no final files
    except SystemExit as stop:  # argparse's usage errors and --help
        process_exit.finish(stop.code if isinstance(stop.code, int) else (0 if stop.code is None else 1))
        raise
    except BaseException:
        if process_exit.teardown_skipped():
            traceback.print_exc()
            process_exit.finish(1)
        raise
    process_exit.finish(0)
