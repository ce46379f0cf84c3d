"""The commit that computed a study's record (issue #65): each record a study keeps in the repository
(docs/study_results/: a trunk's ``trunk_<T>.npz``, the power plan, #46's Table 1, the positive control) carries the
git commit of the code that wrote it, and whether that checkout's tracked files differed from the commit (``dirty``),
so every kept number can be traced to the code that made it. Records written before this carry nothing; they are
not rewritten.

The pooled table (studies.table1_pooled.pooled_table) is not such a record: it is rebuilt byte for byte from the kept
records, and docs/results.md names the commit it was written at.
"""
from __future__ import annotations

import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def computed_at(root: str | Path = ROOT) -> dict:
    """``{"commit": HEAD's full sha, "dirty": tracked files differ from it}`` of the checkout at ``root`` (untracked
    files do not count); ``{"commit": "", "dirty": None}`` outside a git checkout or without git."""
    def git(*args: str) -> str:
        return subprocess.run(["git", "--no-optional-locks", "-C", str(root), *args], capture_output=True, text=True,
                              check=True, timeout=60).stdout

    try:
        commit = git("rev-parse", "--verify", "HEAD").strip()
        dirty = bool(git("status", "--porcelain", "--untracked-files=no").strip())
    except (OSError, subprocess.CalledProcessError, subprocess.TimeoutExpired):
        return {"commit": "", "dirty": None}
    return {"commit": commit, "dirty": dirty}


def with_commit(record: dict, root: str | Path = ROOT) -> dict:
    """``record`` with ``computed_at`` (the commit above) added last: what a study writes as its JSON record."""
    return {**record, "computed_at": computed_at(root)}
