"""The order in which make test hands test files to its workers (tests/conftest.py): longest first."""
from __future__ import annotations

from typing import Callable, TypeVar

T = TypeVar("T")
UNMEASURED = 5.0
"""Seconds assumed for a test file that tests/file_seconds.json does not list yet (a new file)."""


def longest_files_first(items: list[T], file_of: Callable[[T], str], seconds: dict[str, float]) -> list[T]:
    """``items`` grouped by file, the files by measured seconds, longest first (ties by path); a file's own items
    keep their order. Longest-processing-time-first is the classic rule for two machines: no long job starts last."""
    return sorted(items, key=lambda item: (-seconds.get(file_of(item), UNMEASURED), file_of(item)))
