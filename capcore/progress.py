"""One line per finished piece of a long command, for the pipeline to echo while the command runs.

The pipeline runs a stage's commands side by side, each into its own log part, and prints nothing of them until
the stage ends: stage one's three studies ran 6-9 minutes behind one line (issue #65). A command says
``progress: <what finished>`` on stdout; ``capaware/pipeline.sh`` follows the log parts and echoes each such line
as ``[stage] <what finished>`` the moment it is written. Progress bars stay in the logs: two or three bars
redrawing one terminal line at once read as noise.
"""
from __future__ import annotations

PREFIX = "progress: "


def progress_line(message: str) -> None:
    """Print ``message`` as a progress line (flushed, so the pipeline sees it now, not when the buffer fills)."""
    print(f"{PREFIX}{message}", flush=True)
