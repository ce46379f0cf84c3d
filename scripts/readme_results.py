"""Write result files into README.md or a docs page: ``python scripts/readme_results.py NAME=FILE ...
[--readme README.md | docs/results.md | docs/benchmarks.md]``.

The page holds blocks ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``; each is replaced by the
file given for NAME: a Markdown table (``.md``) verbatim, a flat JSON object (``.json``) as a
one-row table of its numbers, a command's printed output (``.txt``, e.g. a benchmark's) verbatim in a
fenced block. So the pages' figures are the result files' bytes, never retyped;
a header line under each block names the file, and the commit it was made at.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from capcore.atomic import write_text  # noqa: E402
from capcore.errors import CapawareError, run_cli  # noqa: E402


def render(path: Path) -> str:
    if not path.is_file():
        raise CapawareError(path, "result file not found", "run the command that writes it first")
    if path.suffix == ".json":
        data = json.loads(path.read_text())
        if not isinstance(data, dict):
            raise CapawareError(path, "not a JSON object", "give a flat {name: number} file")
        keys = [k for k, v in data.items() if isinstance(v, (int, float))]
        return ("| " + " | ".join(keys) + " |\n|" + "---:|" * len(keys) + "\n| "
                + " | ".join(f"{data[k]:.3f}" for k in keys) + " |\n")
    if path.suffix == ".txt":
        return "```text\n" + path.read_text().strip("\n") + "\n```\n"
    return path.read_text().strip() + "\n"


def commit() -> str:
    try:
        return subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True,
                              check=True).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        return "unknown"


def replace(readme: str, name: str, body: str, source: str, made_at: str, page: str = "README.md") -> str:
    pattern = re.compile(rf"(<!-- results:{re.escape(name)} -->\n)(.*?)(<!-- /results:{re.escape(name)} -->)", re.S)
    if not pattern.search(readme):
        raise CapawareError(page, f"no block <!-- results:{name} --> ... <!-- /results:{name} -->",
                            "add the two marker lines where the table belongs")
    text = f"<sub>From `{source}` (commit {made_at}).</sub>\n\n{body}"
    return pattern.sub(lambda m: m.group(1) + text + m.group(3), readme)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("blocks", nargs="+", help="NAME=FILE")
    parser.add_argument("--readme", default="README.md", help="the page that holds the blocks")
    parser.add_argument("--commit", default=None, help="the commit the results were made at (default: HEAD)")
    a = parser.parse_args(argv)
    readme = Path(a.readme)
    text = readme.read_text()
    for item in a.blocks:
        name, sep, file = item.partition("=")
        if not sep:
            raise CapawareError(item, "not NAME=FILE", "e.g. captioning=runs/demo/results/captioning/captioning.md")
        text = replace(text, name, render(Path(file)), file, a.commit or commit(), str(readme))
    write_text(readme, text)
    print(f"{readme}: {len(a.blocks)} block(s) written")


if __name__ == "__main__":
    run_cli(main)
