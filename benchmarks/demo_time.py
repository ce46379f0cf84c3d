"""Where a pipeline run's time went, read from its logs: ``python benchmarks/demo_time.py runs/demo``.

Prints one Markdown table: each stage's wall time (the pipeline's ``[stage] done in N s`` line), and inside it
the pieces its commands timed (``timing ...`` lines, capcore/stopwatch.py: class pretraining, the caption
graph, each stage-one row, XE and SCST steps, validation, decoding, scoring, grounding) or, where a stage's
commands print none (data, features, logs from before the timing lines), the elapsed time in each progress
bar's last frame. Pieces of commands that ran side by side (``jobs: 2``) add up to more than their stage's
wall time: they are seconds of one core each.
"""
from __future__ import annotations

import argparse
import re
import sys
from collections import defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from capaware.stages import names  # noqa: E402
from capcore.stopwatch import parse_line  # noqa: E402

STAGES = names()  # the pipeline's stage table, joint included
DONE = re.compile(r"^\[(?P<stage>\w+)\] done in (?P<s>\d+) s$")
BAR = re.compile(r"^(?P<desc>[^:|]+):\s+\d+%\|.*\| \d+/(?P<total>\d+) \[(?:(?P<h>\d+):)?(?P<m>\d+):(?P<sec>\d+)<")


def short(command: str) -> str:
    """A command named by its config file's stem and its --only, the rest left out."""
    words = command.split()
    config = next((Path(w).stem for w in words if w.endswith((".yaml", ".yml"))), words[-1] if words else "")
    return config + (f" --only {words[words.index('--only') + 1]}" if "--only" in words[:-1] else "")


def stage_pieces(log: Path) -> tuple[int | None, dict[str, float]]:
    """(the stage's wall seconds or None, {piece: seconds}) from one stage log."""
    wall, pieces, bars, command = None, defaultdict(float), {}, ""
    for line in log.read_text(errors="replace").replace("\r", "\n").splitlines():
        if line.startswith("$ "):
            command = short(line[2:])
        elif (m := DONE.match(line.strip())) is not None:
            wall = int(m["s"])
        elif (timed := parse_line(line)) is not None:
            label, phases = timed
            for name, seconds in phases.items():
                pieces[f"{label}: {name}"] += seconds
        elif (m := BAR.match(line.strip())) is not None:  # a bar's last frame holds its time
            seconds = int(m["h"] or 0) * 3600 + int(m["m"]) * 60 + int(m["sec"])
            bars[f"{m['desc'].strip()} /{m['total']} ({command})"] = seconds
    if not pieces:  # commands that print no timing line (data, features; logs from before the timing lines)
        pieces.update(bars)
    return wall, dict(pieces)


def table(run: Path) -> str:
    rows = ["| stage | wall (s) | pieces (s; side-by-side commands add up to more than the wall) |", "|---|---:|---|"]
    total = 0
    for stage in STAGES:
        log = run / "logs" / f"{stage}.log"
        if not log.is_file():
            continue
        wall, pieces = stage_pieces(log)
        total += wall or 0
        text = "; ".join(f"{name} {s:.0f}" for name, s in pieces.items()) or "—"
        rows.append(f"| {stage} | {wall if wall is not None else 'n/a'} | {text} |")
    rows.append(f"| pipeline | {total} | |")
    return "\n".join(rows)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", type=Path, help="a pipeline run folder (runs/demo)")
    args = parser.parse_args(argv)
    if not (args.run / "logs").is_dir():
        raise SystemExit(f"error: {args.run}/logs: no pipeline logs there "
                         f"(fix: run the pipeline into {args.run} first)")
    print(table(args.run))


if __name__ == "__main__":
    main()
