"""Shared test fixtures, the markers, and the order in which pytest-xdist hands out test files."""
import json
from pathlib import Path

import pytest
import torch

from tests.file_order import longest_files_first

FILE_SECONDS = Path(__file__).with_name("file_seconds.json")
"""Measured seconds per test file (``python benchmarks/test_time.py JUNIT --write tests/file_seconds.json``)."""


@pytest.fixture(scope="module")
def one_thread():
    """Tiny tensors gain nothing from 2 threads and lose a lot when the cores are shared."""
    before = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(before)


def pytest_configure(config):
    config.addinivalue_line("markers", "studies: the study commands, README's commands and the plain-install "
                                       "pipeline, run as written on tiny configs (make test-studies; make test "
                                       "leaves them out)")
    config.addinivalue_line("markers", "integration: whole-pipeline scenarios whose behaviour make test also checks "
                                       "in smaller pieces (the COCO rehearsal, two jobs against one, two nodes; "
                                       "make test-integration, which CI runs; make test leaves them out)")


def pytest_collection_modifyitems(config, items):
    """The longest test files first, by their measured seconds (tests/file_seconds.json). Under ``--dist loadfile
    --no-loadscope-reorder`` (make test) the two workers then take files longest first, so no long file starts last
    while the other worker sits idle: pytest-xdist's own order (most tests first) had left the 212 s COCO
    rehearsal, one test, for the end."""
    seconds = json.loads(FILE_SECONDS.read_text()) if FILE_SECONDS.is_file() else {}
    items[:] = longest_files_first(items, lambda item: item.nodeid.split("::")[0], seconds)
