"""Every tracked Python file keeps to the line length pyproject.toml sets for ruff (issue #48): read from the config,
so the rule and its check cannot drift, and checked without ruff, which `make test` does not install. The shell
scripts, YAML files, Makefile and .ci/ keep to the same limit (issue #58), the declaration's stamped arm files apart."""
import subprocess
import tomllib

import yaml

from tests.pipeline_helpers import ROOT


def test_every_python_line_fits_the_configured_line_length():
    limit = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]
    files = subprocess.run(["git", "ls-files", "*.py"], cwd=ROOT, capture_output=True, text=True, check=True).stdout
    long = [f"{name}:{n}: {len(line)} characters" for name in files.split() if (ROOT / name).is_file()
            for n, line in enumerate((ROOT / name).read_text().splitlines(), 1) if len(line) > limit]
    assert long == [], f"{len(long)} lines over {limit}: {long[:20]}"


def test_every_shell_yaml_and_make_line_fits_the_configured_line_length():
    """The same limit for the shell scripts, the YAML files, the Makefile and .ci/ (issue #58). The files listed
    under arm_files in configs/study/declaration_table1_pooled.yaml are exempt: the declaration's stamp is one
    sha256 over their bytes, so rewrapping one would break the stamp of a study under way. They may be rewrapped
    once the study ends (with a new declaration, or none that stamps them); the list is read from the declaration,
    so the exemption cannot outgrow it."""
    limit = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["ruff"]["line-length"]
    declaration = yaml.safe_load((ROOT / "configs/study/declaration_table1_pooled.yaml").read_text())
    stamped = set(declaration["arm_files"])
    files = subprocess.run(["git", "ls-files", "*.sh", "*.yaml", "*.yml", "Makefile", ".ci/*"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout
    checked = [name for name in files.split() if name not in stamped and (ROOT / name).is_file()]
    assert "Makefile" in checked and any(name.endswith(".sh") for name in checked)
    long = [f"{name}:{n}: {len(line)} characters" for name in checked
            for n, line in enumerate((ROOT / name).read_text().splitlines(), 1) if len(line) > limit]
    assert long == [], f"{len(long)} lines over {limit}: {long[:20]}"
