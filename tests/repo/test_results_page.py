"""docs/results.md is a front page a reader can use (issue #48): at most 300 lines, each table beside the command
that regenerates it, each study's full record on its own page; README prints Table 1 once."""
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
BLOCK = re.compile(r"<!-- results:([\w-]+) -->\n.*?<!-- /results:\1 -->\n(.*?)\n", re.S)


def test_the_results_page_is_a_short_front_page_whose_tables_name_their_commands():
    page = (ROOT / "docs" / "results.md").read_text()
    assert len(page.splitlines()) <= 300
    blocks = BLOCK.findall(page)
    assert len(blocks) >= 5
    for name, after in blocks:  # the line after each table says how to make it again
        assert re.match(r"Regenerate: `[^`]+`", after), f"block {name} is not followed by its command: {after!r}"
    pages = re.findall(r"\]\((studies/[\w.]+\.md)\)", page)
    assert set(pages) == {p.relative_to(ROOT / "docs").as_posix() for p in (ROOT / "docs" / "studies").glob("*.md")}



def test_readme_prints_one_table_1_each_row_once_in_at_most_200_lines():
    """README is a front door a newcomer reads in five minutes (issue #58): at most 200 lines and one Table 1, the
    demo's 8 rows, each once (the LSTM rows had been printed twice; the Transformer's table: docs/captioning.md)."""
    readme = (ROOT / "README.md").read_text()
    assert len(readme.splitlines()) <= 200
    rows = re.findall(r"^\|.*`(runs/demo/captioners/\w+/metrics_test\.json)` \|$", readme, re.M)
    assert len(rows) == 8 and len(set(rows)) == 8, rows
    assert readme.count("<!-- results:captioning -->") == 1 and "<!-- results:transformer -->" not in readme
