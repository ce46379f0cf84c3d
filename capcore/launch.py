"""``python -m capcore.launch [torchrun options] SCRIPT [ARGS]``: torchrun that keeps each rank's output
and, when a rank dies, says which one, how, and what it said last, in one line.

torchrun alone reports a dead rank in a ``ChildFailedError`` block whose first line is empty, and a rank
killed by a signal leaves no trace of what it was doing; the pipeline's one error line then read
``error: stage rl failed: ...ChildFailedError:`` and nothing more (issue #45). Here every rank's stdout
and stderr go to files (torchrun's ``--redirects`` under ``--log-dir``: ``$CAPAWARE_RANK_LOGS``, else a
new temporary folder), each rank's error file is set (``capcore.errors.run_cli`` records the traceback
into it), and once the job ends the ranks' output is copied to this process's stdout, rank by rank, so
a stage log holds all of it. A failed job ends with::

    error: rank 1 died of SIGABRT (exit code -6); its last line: 'terminate called without an
    active exception'; its output: <log dir>/.../attempt_0/1/stderr.log

The pipeline (scripts/pipeline.sh --nproc) starts every parallel stage through this module.
"""
from __future__ import annotations

import json
import os
import re
import signal
import sys
import tempfile
from pathlib import Path

from torch.distributed import run as torchrun
from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure


def rank_folders(log_dir: Path) -> dict[int, Path]:
    """Local rank (this machine's) -> the folder torchrun wrote that rank's stdout.log, stderr.log and
    error.json into: the last attempt's (DefaultLogsSpecs: <run id>_<random>/attempt_<n>/<local rank>)."""
    folders: dict[int, Path] = {}
    for out in sorted(log_dir.glob("*/attempt_*/*/stdout.log"), key=lambda p: int(p.parent.parent.name[8:])):
        folders[int(out.parent.name)] = out.parent
    return folders


def last_line(folder: Path) -> tuple[str, Path | None]:
    """The last non-blank line a rank printed and the file it is in: stderr first (a dying process's last
    words go there), then stdout; progress-bar redraws (carriage returns) count as lines."""
    for name in ("stderr.log", "stdout.log"):
        path = folder / name
        if path.is_file():
            lines = [ln.strip() for ln in path.read_text(errors="replace").replace("\r", "\n").splitlines()]
            lines = [ln for ln in lines if ln]
            if lines:
                return lines[-1], path
    return "", None


def describe(rank: int, failure: ProcessFailure, folder: Path | None) -> str:
    """One line for a dead rank (the launcher's last line, which scripts/pipeline.sh puts in its own)."""
    how = (f"died of {failure.signal_name()} (exit code {failure.exitcode})" if failure.exitcode < 0
           else f"exited with code {failure.exitcode}")
    said, where = last_line(folder) if folder is not None else ("", None)
    said = f"; its last line: {said[:200]!r}" if said else "; it printed nothing"
    where = f"; its output: {where}" if where else (f"; its output: {folder}" if folder else "")
    return f"error: rank {rank} {how}{said}{where}"


def message_text(failure: ProcessFailure) -> str:
    """A failure's recorded message as text (torch keeps the error file's JSON object for some failures)."""
    message = failure.message
    if isinstance(message, dict):
        message = message.get("message", json.dumps(message))
    return str(message or "")


def stopped_by_launcher(failure: ProcessFailure) -> bool:
    """torchrun stops the surviving ranks with SIGTERM once one has died: a consequence, not a cause."""
    text = message_text(failure)  # torch's words: "Signal 15 (SIGTERM) received", "Process N got signal: 15"
    return failure.exitcode == -signal.SIGTERM or "SIGTERM" in text or re.search(r"[Ss]ignal:? 15\b", text) is not None


def root_cause(err: ChildFailedError) -> tuple[int, ProcessFailure]:
    """The rank most likely to have failed first of its own accord. A rank killed by a signal (not torchrun's
    SIGTERM) comes first: the others then fail on the closed connection ("Connection closed by peer"), and
    their error files may carry an earlier timestamp, since torch stamps whole seconds. Then a rank that exited
    with an error; a rank torchrun stopped only when nothing else failed. Ties: the earliest, then the lowest
    rank. (torch's own ``get_first_failure`` goes by timestamp alone; it named rank 0's peer error once.)"""
    def order(item):
        rank, failure = item
        kind = 2 if stopped_by_launcher(failure) else (0 if failure.exitcode < 0 else 1)
        return kind, failure.timestamp, rank

    return min(err.failures.items(), key=order)


def replay(folders: dict[int, Path]) -> None:
    """Every rank's output, rank by rank, on this process's stdout (the stage log)."""
    for rank, folder in sorted(folders.items()):
        for name in ("stdout.log", "stderr.log"):
            text = (folder / name).read_text(errors="replace") if (folder / name).is_file() else ""
            if text.strip():
                print(f"----- local rank {rank}, {name[:-4]} ({folder / name}) -----")
                print(text.rstrip("\n"), flush=True)


def main(argv: list[str] | None = None) -> int:
    args = torchrun.parse_args(sys.argv[1:] if argv is None else argv)
    base = Path(args.log_dir or os.environ.get("CAPAWARE_RANK_LOGS") or tempfile.mkdtemp(prefix="capaware_ranks_"))
    base.mkdir(parents=True, exist_ok=True)
    args.log_dir = tempfile.mkdtemp(prefix="launch_", dir=base)  # this launch's own, so no older run is read
    args.redirects, args.tee = "3", "0"
    print(f"torchrun: each rank's output in {args.log_dir}", flush=True)
    try:
        torchrun.run(args)
    except ChildFailedError as err:
        folders = rank_folders(Path(args.log_dir))
        replay(folders)
        rank, failure = root_cause(err)
        text = message_text(failure)
        if text and failure.exitcode >= 0 and not text.startswith("To enable traceback"):
            print(f"rank {rank}'s error file ({failure.error_file}):\n{text}", file=sys.stderr)
        print(describe(rank, failure, folders.get(failure.local_rank)), file=sys.stderr, flush=True)
        return 1
    replay(rank_folders(Path(args.log_dir)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
