"""Write result files into README.md or a docs page: ``python scripts/readme_results.py NAME=FILE ...
[--readme README.md | docs/results.md | docs/benchmarks.md]``.

The page holds blocks ``<!-- results:NAME -->`` ... ``<!-- /results:NAME -->``; each is replaced by the
file given for NAME: a Markdown table (``.md``) verbatim, a flat JSON object (``.json``) as a
one-row table of its numbers, a command's printed output (``.txt``, e.g. a benchmark's) verbatim in a
fenced block. So the pages' figures are the result files' bytes, never retyped;
a header line under each block names the file, and the commit it was made at.

Paths of the machine that made a file are not the reader's, so they are written portably: the checkout
the results were made in (``--root``, default: here) is dropped, a Python install's site-packages folder
becomes ``<site-packages>``, and the temporary folder becomes ``$TMPDIR``. Nothing else is changed.
"""
from __future__ import annotations

import argparse
import json
import re
import subprocess
import sys
import tempfile
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


SITE_PACKAGES = re.compile(r"[^\s`'\"()]*/site-packages/")


def portable(text: str, root: Path) -> str:
    """The text with this machine's paths made the reader's: see the module docstring."""
    text = text.replace(f"{root.resolve()}/", "")
    text = SITE_PACKAGES.sub("<site-packages>/", text)
    return text.replace(f"{Path(tempfile.gettempdir())}/", "$TMPDIR/")


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
    parser.add_argument("--root", default=".", help="the checkout the results were made in (its path is dropped)")
    a = parser.parse_args(argv)
    readme = Path(a.readme)
    text = readme.read_text()
    for item in a.blocks:
        name, sep, file = item.partition("=")
        if not sep:
            raise CapawareError(item, "not NAME=FILE", "e.g. captioning=runs/demo/results/captioning/captioning.md")
        body, source = (portable(t, Path(a.root)) for t in (render(Path(file)), file))
        text = replace(text, name, body, source, a.commit or commit(), str(readme))
    write_text(readme, text)
    print(f"{readme}: {len(a.blocks)} block(s) written")


if __name__ == "__main__":
    run_cli(main)
