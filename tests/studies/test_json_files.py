"""studies.json_files: result files read in order, a missing or half-written one stopped in one line."""
import pytest

from capcore.errors import CapawareError
from studies.json_files import read_json_files


def test_files_are_read_in_order_and_bad_ones_named(tmp_path):
    (tmp_path / "a.json").write_text('{"seed": 0}')
    (tmp_path / "b.json").write_text('[1, 2]')
    assert read_json_files([str(tmp_path / "b.json"), str(tmp_path / "a.json")], "fix") == [[1, 2], {"seed": 0}]
    (tmp_path / "half.json").write_text('{"seed": ')
    with pytest.raises(CapawareError, match=r"half.json: not readable JSON .*\(fix: run the maker\)"):
        read_json_files([str(tmp_path / "a.json"), str(tmp_path / "half.json")], "run the maker")
    with pytest.raises(CapawareError, match=r"none.json: not found \(fix: run the maker\)"):
        read_json_files([str(tmp_path / "none.json")], "run the maker")
