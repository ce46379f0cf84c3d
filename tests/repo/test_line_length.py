"""Every tracked Python file keeps to the line length pyproject.toml sets for ruff (issue #48): read from the config,
so the rule and its check cannot drift, and checked without ruff, which `make test` does not install."""
import subprocess
import tomllib

from tests.pipeline_helpers import ROOT


def test_every_python_line_fits_the_configured_line_length():
    limit = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    long = [f"{name}:{n}: {len(line)} characters" for name in files.split() if (ROOT / name).is_file()
            for n, line in enumerate((ROOT / name).read_text().splitlines(), 1) if len(line) > limit]
    assert long == [], f"{len(long)} lines over {limit}: {long[:20]}"
