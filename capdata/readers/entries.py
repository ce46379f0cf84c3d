"""Checks every JSON reader makes of one entry, written once so that their one-line errors read alike.

``entry_error`` builds the error of entry ``i`` (naming the file, the entry's number and its image),
``check_entry`` refuses a non-object or a missing field, ``read_joints`` checks 16 MPII joints and
their 0/1 flags (the pose JSON and MPII's JSON layout share them).
"""
from __future__ import annotations

import math
from pathlib import Path
from typing import Callable

from capcore.errors import CapawareError
from capdata.records import MPII_JOINTS

N_JOINTS = len(MPII_JOINTS)
Bad = Callable[..., CapawareError]


def entry_error(path: Path, i: int, entry, name_key: str, label: str = "image",
                default_fix: str = "fix or remove this entry") -> Bad:
    """``bad(problem, fix)``: the CapawareError of entry ``i`` of ``path`` (``label i (name)``)."""
    name = entry.get(name_key, "?") if isinstance(entry, dict) else "?"

    def bad(problem: str, fix: str = default_fix) -> CapawareError:
        return CapawareError(path, f"{label} {i} ({name}): {problem}", fix)
    return bad


def check_entry(entry, required: tuple[str, ...], bad: Bad) -> None:
    if not isinstance(entry, dict):
        raise bad("entry is not an object")
    for key in required:
        if key not in entry:
            raise bad(f"missing required field '{key}'")


def number(value) -> float:
    """A finite JSON number (not a bool); ValueError(value) otherwise."""
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not math.isfinite(value):
        raise ValueError(value)
    return float(value)


def pair(value) -> tuple[float, float]:
    if not isinstance(value, (list, tuple)) or len(value) != 2:
        raise ValueError(value)
    return number(value[0]), number(value[1])


def read_joints(pts, vis, vis_key: str, bad: Bad, count_fix: str) -> tuple[list, list]:
    """16 joints ``[x, y]`` and their 0/1 flags (field ``vis_key``), checked; returns them as lists."""
    if not isinstance(pts, list) or len(pts) != N_JOINTS:
        n = len(pts) if isinstance(pts, list) else "no list of"
        raise bad(f"has {n} joints, expected {N_JOINTS} (MPII order)", count_fix)
    try:
        xy = [list(pair(p)) for p in pts]
    except ValueError as err:
        raise bad(f"joint {err.args[0]!r} is not a pair of finite numbers",
                  "write each joint as [x, y] in pixels") from None
    if not isinstance(vis, list) or len(vis) != N_JOINTS:
        n = len(vis) if isinstance(vis, list) else "not a list of"
        raise bad(f"'{vis_key}' has {n} entries, expected {N_JOINTS}")
    wrong = [v for v in vis if v not in (0, 1)]
    if wrong:
        raise bad(f"'{vis_key}' entries must be 0 or 1, got {wrong[0]!r}")
    return xy, vis


__all__ = ["entry_error", "check_entry", "number", "pair", "read_joints", "N_JOINTS"]
