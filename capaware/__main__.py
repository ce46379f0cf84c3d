"""``python -m capaware ...`` = the ``capaware`` console script."""
from capaware.cli import entry

entry()
