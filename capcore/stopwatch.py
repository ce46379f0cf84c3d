"""Wall time per named phase of one command, printed as one ``timing <label>: ...`` line at its end.

Why: a stage's log then says where its time went (pretraining, the caption graph, each row, training,
decoding, scoring), so a slow CPU is profiled from the logs of the run it already did
(``python benchmarks/demo_time.py runs/demo``) instead of by guess or by a second, instrumented run.
"""
from __future__ import annotations

import re
import time
from contextlib import contextmanager
from typing import Iterator

LINE = re.compile(r"^timing (?P<label>[^:]+): (?P<phases>.*)$")


class Stopwatch:
    def __init__(self, label: str):
        self.label = label
        self.phases: dict[str, float] = {}

    @contextmanager
    def phase(self, name: str) -> Iterator[None]:
        """Add the wall time of the ``with`` body to ``name`` (a phase entered twice sums)."""
        start = time.perf_counter()
        try:
            yield
        finally:
            self.phases[name] = self.phases.get(name, 0.0) + time.perf_counter() - start

    def line(self) -> str:
        return f"timing {self.label}: " + ", ".join(f"{name} {s:.1f} s" for name, s in self.phases.items())


PART = re.compile(r"^(?P<name>.+) (?P<seconds>[0-9]+(?:\.[0-9]+)?) s$")


def parse_line(line: str) -> tuple[str, dict[str, float]] | None:
    """``(label, {phase: seconds})`` of a line written by ``Stopwatch.line``; None for any other line."""
    m = LINE.match(line.strip())
    if m is None:
        return None
    parts = [PART.match(part) for part in m["phases"].split(", ")]
    if not all(parts):
        return None
    return m["label"], {p["name"]: float(p["seconds"]) for p in parts}
