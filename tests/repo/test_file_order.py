"""tests/file_order.py: make test's workers take test files longest first."""
import json
from pathlib import Path

from tests.file_order import UNMEASURED, longest_files_first

ROOT = Path(__file__).resolve().parents[2]


def test_files_go_longest_first_and_keep_their_tests_in_order():
    items = ["a.py::t1", "b.py::t1", "a.py::t2", "c.py::t1", "b.py::t2", "new.py::t1"]
    seconds = {"a.py": 3.0, "b.py": 40.0, "c.py": 12.0}
    order = longest_files_first(items, lambda i: i.split("::")[0], seconds)
    assert order == ["b.py::t1", "b.py::t2", "c.py::t1", "new.py::t1", "a.py::t1", "a.py::t2"]  # new.py: 5 s
    assert UNMEASURED == 5.0


def test_the_measured_seconds_name_test_files_that_exist():
    seconds = json.loads((ROOT / "tests" / "file_seconds.json").read_text())
    missing = [f for f in seconds if not (ROOT / f).is_file()]
    assert not missing, f"tests/file_seconds.json names files that are gone: {missing} (rewrite it: " \
                        "python benchmarks/test_time.py JUNIT --write tests/file_seconds.json)"
