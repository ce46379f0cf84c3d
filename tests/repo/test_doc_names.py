"""Every name other than a path that README.md and docs/ give exists (issue #58: docs/design.md named a function
that no longer existed): each ``python -m MODULE``, each backticked dotted name of a package (a module, a function
or class in it, or a stage config's key such as ``eval.db_split``) and each ``make TARGET``. Paths are
tests/repo/test_doc_paths.py's. Placeholders (``<T>``, ``{name}``, ``*``, ``$VAR``, ``...``) are not names.
"""
from __future__ import annotations

import importlib
import importlib.util
import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
FOLDERS = ("benchmarks", "capaware", "capcore", "capdata", "captioners", "configs", "docs", "embedder", "eval",
           "feature_extract", "joint", "rl", "scripts", "studies", "tests")
PLACEHOLDER = re.compile(r"[<>{}*$]|\.\.\.|\bN\b|\bT\b|XXX")
MODULE = re.compile(r"python3? -m ([A-Za-z_][\w.]*)")


def documents() -> list[Path]:
    files = subprocess.run(["git", "ls-files", "README.md", "docs/*.md", "docs/**/*.md", "*/README.md"], cwd=ROOT,
                           capture_output=True, text=True, check=True).stdout.split()
    return [ROOT / f for f in sorted(set(files))]


def named_modules(doc: Path) -> set[str]:
    return {m.rstrip(".") for m in MODULE.findall(doc.read_text(encoding="utf-8"))
            if m.split(".")[0] in FOLDERS and not PLACEHOLDER.search(m)}


DOTTED = re.compile(r"`((?:%s)(?:\.[A-Za-z_]\w*)+)(?:\(\))?`" % "|".join(FOLDERS))
MAKE = re.compile(r"`make ([a-z][\w-]*)")


def config_keys() -> set[str]:
    """Every dotted key of the stage configs (``train.epochs``, ``eval.db_split``, ``reward.bleu4_weight``), also
    under the pipeline section that holds the stage (``rl.reward.bleu4_weight``): some look like module names."""
    import dataclasses
    import typing

    from captioners.config import CaptionerConfig
    from embedder.config import Stage1Config
    from feature_extract.config import FeaturesConfig
    from rl.config import SCSTConfig

    def walk(cls, prefix: str):
        hints = typing.get_type_hints(cls)
        for f in dataclasses.fields(cls):
            key = f"{prefix}{f.name}"
            yield key
            if dataclasses.is_dataclass(hints[f.name]):
                yield from walk(hints[f.name], key + ".")

    keys = set()
    for section, cls in (("stage1", Stage1Config), ("captioners", CaptionerConfig), ("rl", SCSTConfig),
                         ("features", FeaturesConfig)):
        keys |= {k for key in walk(cls, "") for k in (key, f"{section}.{key}")}
    return keys


def resolves(dotted: str, keys: set[str]) -> bool:
    """``package.module.name`` is a module, or an attribute (function, class, constant) of the longest module
    prefix, or a config key."""
    if dotted in keys:
        return True
    parts = dotted.split(".")
    for cut in range(len(parts), 0, -1):
        module = ".".join(parts[:cut])
        try:
            found = importlib.util.find_spec(module) is not None
        except ModuleNotFoundError:
            found = False
        if found:
            obj = importlib.import_module(module)
            for name in parts[cut:]:
                if not hasattr(obj, name):
                    return False
                obj = getattr(obj, name)
            return True
    return False


def test_every_dotted_name_the_docs_give_resolves():
    keys = config_keys()
    missing = [f"{doc.relative_to(ROOT)}: {name}" for doc in documents()
               for name in sorted(set(DOTTED.findall(doc.read_text(encoding="utf-8")))) if not resolves(name, keys)]
    assert missing == [], f"{len(missing)} functions, classes or modules named in the docs do not exist: {missing[:30]}"


def test_every_make_target_the_docs_give_exists():
    targets = set(re.findall(r"^([a-z][\w-]*):", (ROOT / "Makefile").read_text(), re.M))
    missing = [f"{doc.relative_to(ROOT)}: make {t}" for doc in documents()
               for t in sorted(set(MAKE.findall(doc.read_text(encoding="utf-8")))) if t not in targets]
    assert missing == [], f"make targets named in the docs but not in the Makefile: {missing}"


def test_every_module_the_docs_run_exists():
    missing = [f"{doc.relative_to(ROOT)}: python -m {m}" for doc in documents() for m in sorted(named_modules(doc))
               if importlib.util.find_spec(m) is None]
    assert missing == [], f"{len(missing)} modules run in the docs do not exist: {missing[:30]}"
