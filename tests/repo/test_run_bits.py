"""Every tracked shell script is executable in git (mode 100755), so that `./scripts/pipeline.sh CONFIG` runs as
the docs print it on a fresh clone instead of saying "Permission denied" (issue #65: four had lost the bit)."""
import subprocess

from tests.pipeline_helpers import ROOT


def tracked_modes(pattern: str) -> dict[str, str]:
    """{path: git mode} of the tracked files matching ``pattern``, as the index records them (what a clone gets)."""
    out = subprocess.run(["git", "ls-files", "-s", pattern], cwd=ROOT, capture_output=True, text=True,
                         check=True).stdout
    return {line.split("\t", 1)[1]: line.split()[0] for line in out.splitlines()}


def test_every_tracked_shell_script_is_executable():
    modes = tracked_modes("*.sh")
    assert "scripts/pipeline.sh" in modes and "scripts/demo.sh" in modes  # the listing itself works
    lost = sorted(path for path, mode in modes.items() if mode != "100755")
    assert lost == [], f"tracked shell scripts without the run bit (fix: git update-index --chmod=+x FILE): {lost}"


def test_the_mode_reader_sees_a_lost_bit(tmp_path):
    """The check reads the index, not the work tree: a script committed as 100644 is reported as such."""
    git = ["git", "-c", "user.name=t", "-c", "user.email=t@t", "-C", str(tmp_path)]
    subprocess.run(["git", "init", "-q", str(tmp_path)], check=True)
    (tmp_path / "run.sh").write_text("#!/usr/bin/env bash\n")
    (tmp_path / "run.sh").chmod(0o755)
    subprocess.run([*git, "add", "run.sh"], check=True)
    subprocess.run([*git, "update-index", "--chmod=-x", "run.sh"], check=True)
    out = subprocess.run([*git, "ls-files", "-s", "*.sh"], capture_output=True, text=True, check=True).stdout
    assert out.split()[0] == "100644"
