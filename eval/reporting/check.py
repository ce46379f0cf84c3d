"""Does the report render offline? ``python -m eval.reporting.check RUN/report/index.html``.

Opens the page in headless Chromium with the network cut off and reads back the DOM after load: the
page's own script (eval.reporting.html) has recorded on ``<body>`` how many images loaded and how many
tables rendered. Prints ``report OK: 23/23 images, 6 tables``; exits non-zero with one line when an
image failed, fewer tables rendered than the page holds, the count is missing (script did not run),
the page loads anything from the network, or Chromium is absent. The binary: ``$CHROMIUM``, else
``chromium``, ``chromium-browser`` or ``google-chrome`` on PATH.
"""
from __future__ import annotations

import argparse
import json
import os
import shutil
import subprocess
import tempfile
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

from capcore.errors import CapawareError, run_cli

CHROMIUM_FIX = "apt-get install chromium (Debian/Ubuntu), or set CHROMIUM=/path/to/chrome"
REMOTE = ("http:", "https:", "//", "ftp:")


def find_chromium() -> str:
    env = os.environ.get("CHROMIUM")
    if env:
        found = shutil.which(env)
        if not found:
            raise CapawareError(f"CHROMIUM={env}", "not an executable", CHROMIUM_FIX)
        return found
    for name in ("chromium", "chromium-browser", "google-chrome"):
        found = shutil.which(name)
        if found:
            return found
    raise CapawareError("PATH", "no chromium, chromium-browser or google-chrome found", CHROMIUM_FIX)


def dump_dom(page: Path, timeout: float = 120.0) -> str:
    """The page's DOM after load, from headless Chromium with no network (own profile folder)."""
    chromium = find_chromium()
    with tempfile.TemporaryDirectory(prefix="capaware-chromium-") as profile:
        cmd = [chromium, "--headless", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
               "--allow-file-access-from-files", "--no-first-run", "--disable-extensions",
               "--host-resolver-rules=MAP * ~NOTFOUND", "--proxy-server=127.0.0.1:9",
               f"--user-data-dir={profile}", "--virtual-time-budget=10000", "--dump-dom",
               page.resolve().as_uri()]
        try:
            done = subprocess.run(cmd, check=False, capture_output=True, text=True, timeout=timeout)
        except subprocess.TimeoutExpired:
            raise CapawareError(page, f"Chromium did not finish rendering within {timeout:.0f} s",
                                "check the page opens in a browser") from None
    if done.returncode != 0 or "<body" not in done.stdout:
        tail = (done.stderr.strip().splitlines() or ["no output"])[-1][:200]
        raise CapawareError(page, f"Chromium failed to render the page (exit {done.returncode}: {tail})",
                            CHROMIUM_FIX)
    return done.stdout


class _Dom(HTMLParser):
    def __init__(self):
        super().__init__()
        self.body: dict[str, str] | None = None
        self.remote: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = {k: v or "" for k, v in attrs}
        if tag == "body" and self.body is None:
            self.body = a
        url = a.get("src") if tag in ("img", "script", "iframe", "source") else \
            a.get("href") if tag == "link" else None
        if url and url.strip().lower().startswith(REMOTE):
            self.remote.append(url)


@dataclass
class Result:
    loaded: int
    total: int
    tables: int
    failed: list[str]


def check_dom(dom: str, page: Path | str = "page") -> Result:
    """Counts recorded by the page's script; CapawareError naming what is wrong."""
    parser = _Dom()
    parser.feed(dom)
    body = parser.body or {}
    if parser.remote:
        raise CapawareError(page, f"loads {len(parser.remote)} resource(s) from the network ({parser.remote[0]})",
                            "copy them into the report folder and link them relatively")
    if body.get("data-report-loaded") != "1":
        raise CapawareError(page, "no image/table count on <body> (the page's load script did not run)",
                            "rebuild it with python -m eval.reporting.report")
    try:
        loaded, total = int(body["data-images-loaded"]), int(body["data-images-total"])
        tables, want_tables = int(body["data-tables-rendered"]), int(body.get("data-tables-expected", 0))
        want_images = int(body.get("data-images-expected", total))
        failed = json.loads(body.get("data-images-failed") or "[]")
    except (KeyError, ValueError):
        raise CapawareError(page, "the image/table counts on <body> are malformed",
                            "rebuild it with python -m eval.reporting.report") from None
    if loaded < total:
        raise CapawareError(page, f"{total - loaded} of {total} images did not load ({', '.join(failed[:5])})",
                            "rebuild the report; a file it links is missing or not an image")
    if total < want_images or tables < want_tables:
        raise CapawareError(page, f"rendered {total}/{want_images} images and {tables}/{want_tables} tables",
                            "the HTML is truncated or malformed; rebuild it with python -m eval.reporting.report")
    return Result(loaded, total, tables, failed)


def check_page(page: str | Path) -> Result:
    page = Path(page)
    if not page.is_file():
        raise CapawareError(page, "report page not found", "write it with python -m eval.reporting.report --run RUN")
    return check_dom(dump_dom(page), page)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("page", help="the report's index.html")
    parser.add_argument("--if-available", action="store_true",
                        help="without Chromium, say so and succeed (the pipeline's report stage); "
                             "a page that renders badly still fails")
    a = parser.parse_args(argv)
    if a.if_available:
        try:
            find_chromium()
        except CapawareError as err:
            print(f"report not checked: {err}")
            return
    r = check_page(a.page)
    print(f"report OK: {r.loaded}/{r.total} images, {r.tables} tables")


if __name__ == "__main__":
    run_cli(main)
