"""Every repository path that README.md and docs/ name exists: links, and file or folder names in code
spans (``configs/demo/demo_pose.yaml``, ``capdata/readers/*``, ``configs/paper/coco_{att2all2,topdown}[_scst].yaml``).

Run outputs (``runs/...``), module names (``capaware.doctor``) and placeholders (``<name>``, ``$RUN``) are not
repository paths and are skipped; a name whose first folder is not one of the repository's is too.
"""
import glob
import itertools
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
PAGES = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
TOP = {"capcore", "capdata", "embedder", "joint", "feature_extract", "captioners", "rl", "eval", "configs", "scripts",
       "studies", "benchmarks", "tests", "docs", ".ci"}
TOP_FILES = {"Makefile", "pyproject.toml", "README.md", ".importlinter"}
LINK = re.compile(r"\]\(([^)\s]+)\)")
SPAN = re.compile(r"`([^`\n]+)`")


def expand(word: str) -> list[str]:
    """``a{b,c}[d]`` -> a b, a c, each with and without d."""
    m = re.search(r"\{([^{}]*)\}", word)
    if m:
        return [w for part in m.group(1).split(",") for w in expand(word[:m.start()] + part + word[m.end():])]
    m = re.search(r"\[([^\[\]]*)\]", word)
    if m:
        return expand(word[:m.start()] + word[m.end():]) + expand(word[:m.start()] + m.group(1) + word[m.end():])
    return [word]


def repo_paths(text: str) -> set[str]:
    """Words of code spans that name a repository path."""
    found = set()
    for span in SPAN.findall(text):
        for word in span.split():
            word = re.sub(r":(\d+(-\d+)?)?$", "", word.strip("(),;\"'"))  # file:line and `file: NAME`
            if any(c in word for c in "<>$=") or "://" in word:
                continue
            first = word.split("/")[0]
            if (first in TOP and "/" in word) or word in TOP_FILES:
                found.add(word)
    return found


def exists(path: str, base: Path) -> bool:
    return any(glob.glob(str(base / p)) for p in expand(path))


@pytest.mark.parametrize("page", PAGES, ids=[str(p.relative_to(ROOT)) for p in PAGES])
def test_every_path_a_page_names_exists(page):
    text = page.read_text()
    missing = sorted(p for p in repo_paths(text) if not exists(p, ROOT))
    for target in LINK.findall(text):
        target = target.split("#")[0]
        if target and not re.match(r"^[a-z]+:", target) and not (page.parent / target).exists():
            missing.append(f"link {target}")
    assert not missing, f"{page.relative_to(ROOT)} names paths that do not exist: {missing}"


def test_the_checker_sees_spans_braces_options_and_line_references(tmp_path):
    text = ("`capdata/readers/*` `configs/paper/coco_{att2all2,topdown}[_scst].yaml` `rl/cider.py:40-52` "
            "`runs/demo/x.json` `capaware.doctor` `bash scripts/pipeline.sh configs/nope.yaml run_dir=r`")
    assert repo_paths(text) == {"capdata/readers/*", "configs/paper/coco_{att2all2,topdown}[_scst].yaml", "rl/cider.py",
                                "scripts/pipeline.sh", "configs/nope.yaml"}
    assert exists("configs/paper/coco_{att2all2,topdown}[_scst].yaml", ROOT) and exists("capdata/readers/*", ROOT)
    assert not exists("configs/nope.yaml", ROOT)
    assert sorted(expand("a{b,c}[d]")) == ["ab", "abd", "ac", "acd"]
    assert not list(itertools.chain.from_iterable(glob.glob(str(tmp_path / w)) for w in expand("x{y,z}")))


VOICE = {"a temporary path": re.compile(r"/tmp/"),
         "a machine lent to a session": re.compile(r"\blent\b|\blending\b", re.I),
         "what this development machine cannot reach": re.compile(r"cannot be (downloaded|reached|rerun) here", re.I),
         "a CI run told as history": re.compile(r"\bCI stop \d+")}


@pytest.mark.parametrize("page", [*PAGES, ROOT / "pyproject.toml"], ids=lambda p: str(p.relative_to(ROOT)))
def test_pages_speak_to_the_user_s_machine(page):
    """README, docs/ and the packaging metadata name no path of the machine that wrote them and no story of
    how it was developed: a reader acts on their own install (``capaware doctor`` prints its paths)."""
    found = [f"{page.relative_to(ROOT)}:{n}: {what}" for n, line in enumerate(page.read_text().splitlines(), 1)
             for what, pattern in VOICE.items() if pattern.search(line)]
    assert not found, "\n".join(found)
