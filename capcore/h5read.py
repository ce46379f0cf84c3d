"""Open an HDF5 file that a stage wrote, for reading, with the errors a user can act on: a missing file
and an unreadable or malformed one are each one CapawareError naming the file and the fix, whatever
h5py raised (labels.h5, the neighbour graphs; feats.h5 has its own checks in feature_extract.h5io)."""
from __future__ import annotations

from pathlib import Path
from typing import Callable, TypeVar

import h5py

from capcore.errors import CapawareError

T = TypeVar("T")


def read_h5(path: str | Path, read: Callable[[h5py.File], T], what: str, missing_fix: str, damaged_fix: str) -> T:
    """``read(f)`` on the open file; ``read`` may raise its own CapawareError for content it refuses."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, f"{what} not found", missing_fix)
    try:
        with h5py.File(path, "r") as f:
            return read(f)
    except (OSError, KeyError) as err:
        raise CapawareError(path, f"not a readable {what} ({err})", damaged_fix) from None
