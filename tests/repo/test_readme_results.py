"""scripts/readme_results.py: README tables are result files' bytes, between marker lines."""
import json
import re
import sys
from pathlib import Path

import pytest

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))
from readme_results import main, portable, render  # noqa: E402

ROOT = Path(__file__).resolve().parents[2]

from capcore.errors import CapawareError  # noqa: E402


def test_blocks_are_replaced_by_the_files_and_nothing_else_changes(tmp_path):
    readme = tmp_path / "README.md"
    readme.write_text("intro\n<!-- results:t -->\nold table\n<!-- /results:t -->\nmiddle\n"
                      "<!-- results:acc -->\n<!-- /results:acc -->\nend\n")
    table = tmp_path / "t.md"
    table.write_text("| a | b |\n|---|---|\n| 1 | 2 |\n")
    acc = tmp_path / "acc.json"
    acc.write_text(json.dumps({"shape": 0.8125, "colour": 0.9, "note": "text is skipped"}))
    main([f"t={table}", f"acc={acc}", "--readme", str(readme), "--root", str(tmp_path)])
    text = readme.read_text()
    assert "old table" not in text and "| a | b |\n|---|---|\n| 1 | 2 |\n<!-- /results:t -->" in text
    assert "| shape | colour |\n|---:|---:|\n| 0.812 | 0.900 |" in text and "note" not in text.split("acc -->")[1]
    assert text.startswith("intro\n") and "\nmiddle\n" in text and text.endswith("end\n")
    assert "From `t.md`" in text  # named from the checkout it was made in
    main([f"t={table}", "--readme", str(readme), "--root", str(tmp_path)])  # idempotent
    assert readme.read_text() == text
    out = tmp_path / "bench.txt"
    out.write_text("# python benchmarks/x.py\n  a   1.5 s\n")  # a benchmark's output: verbatim, fenced
    main([f"t={out}", "--readme", str(readme), "--root", str(tmp_path)])
    assert "<!-- results:t -->\n<sub>From `bench.txt`" in readme.read_text()
    assert "\n```text\n# python benchmarks/x.py\n  a   1.5 s\n```\n<!-- /results:t -->" in readme.read_text()
    with pytest.raises(CapawareError, match="no block"):
        main([f"missing={table}", "--readme", str(readme)])
    with pytest.raises(CapawareError, match="not found"):
        main([f"t={tmp_path / 'nope.md'}", "--readme", str(readme)])


def test_paths_of_the_machine_that_made_a_file_are_written_portably(tmp_path):
    """A result file names where its run lay (a clone, a venv, a temp folder); the page names none of them."""
    clone = tmp_path / "clone"
    table = clone / "runs" / "demo" / "captioning.md"
    table.parent.mkdir(parents=True)
    venv_lib = clone / ".venv" / "lib" / "python3.11" / "site-packages" / "pycocoevalcap" / "spice" / "lib"
    table.write_text(f"| a |\n|---|\n| 1 |\n- S n/a: jars absent from {venv_lib}; copy them into {venv_lib}\n"
                     f"- preds: {clone}/runs/demo/preds.json\n")
    readme = tmp_path / "README.md"
    readme.write_text("<!-- results:t -->\n<!-- /results:t -->\n")
    main([f"t={table}", "--readme", str(readme), "--root", str(clone), "--commit", "abc1234"])
    text = readme.read_text()
    assert str(tmp_path) not in text and "/tmp/" not in text
    assert "From `runs/demo/captioning.md` (commit abc1234)" in text
    assert "absent from <site-packages>/pycocoevalcap/spice/lib; copy them into <site-packages>/pycocoevalcap" in text
    assert "- preds: runs/demo/preds.json" in text


def test_every_block_on_the_pages_equals_the_file_it_names():
    """A page's block from a file kept in the repository is that file's rendering now: no page keeps stale figures
    (docs/own_images.md showed a 45.0 MiB model after README had the reproduced 21.0 MiB, issue #48)."""
    block = re.compile(r"<!-- results:([\w-]+) -->\n<sub>From `([^`]+)` \(commit \w+\)\.</sub>\n\n"
                       r"(.*?)<!-- /results:\1 -->",
                       re.S)
    checked = 0
    for page in [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]:
        for name, source, body in block.findall(page.read_text()):
            if source.startswith(("benchmarks/", "docs/")):  # kept in the repository (runs/ is a user's own)
                assert body == portable(render(ROOT / source), ROOT), f"{page.name}: block {name} is not {source}"
                checked += 1
    assert checked >= 10
