"""README's folder map matches the tree (issue #65): every top-level folder of the checkout has a row, every row's
folder exists, and a bare subfolder a row names in its description (`demo/`, `paper/`) exists under that row's
folder. The path check (test_doc_paths.py) reads paths like `configs/demo/x.yaml`, not prose that names a folder,
so a row saying configs/ still held a `study/` that had moved away passed it."""
import re
import subprocess

from tests.pipeline_helpers import ROOT

ROW = re.compile(r"^\| `([\w.]+)/` \| (.*) \|$")
BARE = re.compile(r"`([\w.-]+)/`")


def folder_map(readme: str) -> dict[str, str]:
    """{folder: description} of the rows of README's "Folder map" section."""
    section = readme.split("\n## Folder map\n", 1)[1].split("\n## ", 1)[0]
    return {m.group(1): m.group(2) for line in section.splitlines() if (m := ROW.match(line))}


def stale_names(rows: dict[str, str], root) -> list[str]:
    """Rows whose folder is missing, or whose description names a bare subfolder the folder lacks."""
    found = [f"{folder}/ (no such folder)" for folder in rows if not (root / folder).is_dir()]
    for folder, text in rows.items():
        found += [f"{folder}/{sub}/ (named in {folder}/'s row)" for sub in BARE.findall(text)
                  if not (root / folder / sub).is_dir()]
    return found


def test_every_row_of_the_folder_map_names_what_is_there():
    rows = folder_map((ROOT / "README.md").read_text())
    assert {"configs", "embedder", "studies"} <= set(rows)  # the parser read the table
    assert stale_names(rows, ROOT) == []


def test_every_top_level_folder_has_a_row():
    files = subprocess.run(["git", "ls-files"], cwd=ROOT, capture_output=True, text=True, check=True).stdout.split()
    tops = {name.split("/")[0] for name in files if "/" in name and not name.startswith(".")}
    assert sorted(tops - set(folder_map((ROOT / "README.md").read_text()))) == []


def test_the_check_sees_a_moved_subfolder(tmp_path):
    (tmp_path / "configs" / "demo").mkdir(parents=True)
    rows = folder_map("# x\n\n## Folder map\n\n| folder | what |\n|---|---|\n"
                      "| `configs/` | `demo/` (and the study's `study/`) |\n| `gone/` | x |\n\n## Next\n| `x/` | y |\n")
    assert rows == {"configs": "`demo/` (and the study's `study/`)", "gone": "x"}
    assert stale_names(rows, tmp_path) == ["gone/ (no such folder)", "configs/study/ (named in configs/'s row)"]
