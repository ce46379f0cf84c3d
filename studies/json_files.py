"""Read a result file that a command wrote (JSON), or stop in one line that names the file and the command to run.

Why: the scripts that sum results up over seeds (ceiling_seeds, probe_curve_seeds, plot_probe_curves) each read a
list of such files, and a missing or half-written one must say which and how to make it, not raise a traceback.
"""
from __future__ import annotations

import json
from pathlib import Path

from capcore.errors import CapawareError


def read_json_files(paths: list[str], fix: str) -> list:
    """The parsed contents of every path, in order; ``fix`` says which command writes them."""
    out = []
    for p in map(Path, paths):
        if not p.is_file():
            raise CapawareError(p, "not found", fix)
        try:
            out.append(json.loads(p.read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError, json.JSONDecodeError) as err:
            raise CapawareError(p, f"not readable JSON ({err})", fix) from None
    return out
