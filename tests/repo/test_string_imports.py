"""No import by string that dodges a cycle (issue #65): a first-party module that names another one in a string
(``"embedder.model:Embedder"`` for ``registry.imported``, ``"embedder.rows"`` for ``importlib.import_module``, a
registry's ``"module:Class"`` entry) imports it as surely as an ``import`` line does, only later. Each such string is
an edge of the import graph here: grimp's static graph of the packages ``.importlinter`` names, plus every string
edge, and a string edge whose target reaches its source back is a cycle, named by file and line. The registries'
lazy ``module:Class`` strings (losses, cores, formats) are fine: they point down, so they close none. (The losses'
closed one while ``MethodLoss``, which reads the registry, lived in ``embedder/losses/base.py``, which every loss
module imports; it is in ``embedder/losses/method_loss.py`` now.)
"""
from __future__ import annotations

import ast
import configparser
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def first_party(root: Path = ROOT) -> tuple[str, ...]:
    """The root packages of ``.importlinter``: the project's own."""
    config = configparser.ConfigParser()
    config.read(root / ".importlinter")
    return tuple(config["importlinter"]["root_packages"].split())


def module_files(packages, root: Path) -> dict[str, Path]:
    """Module name -> its file, for every module of ``packages`` under ``root``."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            found[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    return found


def string_imports(path: Path, packages, modules) -> list[tuple[int, str, str]]:
    """(line, the string, the module it names) for every string constant of ``path`` that is a whole dotted name of
    a first-party module, alone (``"pkg.module"``) or with an attribute (``"pkg.module:Name"``)."""
    pattern = re.compile(r"(?:%s)(?:\.\w+)*" % "|".join(map(re.escape, packages)))
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), str(path))):
        if isinstance(node, ast.Constant) and isinstance(node.value, str):
            module, colon, name = node.value.partition(":")
            if not pattern.fullmatch(module) or (colon and not name.isidentifier()):
                continue
            if (colon or "." in module) and module in modules:
                found.append((node.lineno, node.value, module))
    return found


def string_import_cycles(packages, root: Path = ROOT, **grimp_options) -> list[str]:
    """``file:line: "string" closes a cycle: target -> ... -> source`` for every string import whose target
    module reaches back to the module holding the string, in the static graph with every string edge added."""
    import grimp

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    graph = grimp.build_graph(*packages, **grimp_options)
    files = module_files(packages, root)
    edges = [(source, line, text, target) for source, path in files.items()
             for line, text, target in string_imports(path, packages, graph.modules) if target != source]
    for source, _, _, target in edges:
        graph.add_import(importer=source, imported=target)
    found = []
    for source, line, text, target in edges:
        chain = graph.find_shortest_chain(importer=target, imported=source)
        if chain:
            found.append(f"{files[source].relative_to(root)}:{line}: {text!r} closes a cycle: {' -> '.join(chain)}")
    return sorted(found)


def test_no_string_import_closes_a_cycle():
    packages = first_party()
    assert "embedder" in packages and "capcore" in packages
    found = string_import_cycles(packages)
    assert found == [], "imports by string that dodge a cycle (import the module plainly, or move what both " \
                        "need below them):\n" + "\n".join(found)


def test_the_registries_strings_are_edges_that_close_no_cycle():
    """The check sees the registries' lazy strings (so it is not vacuous), and they pass."""
    packages = first_party()
    files = module_files(packages, ROOT)
    seen = {(source, target) for source, path in files.items()
            for _, _, target in string_imports(path, packages, set(files))}
    assert {("embedder.losses.registry", "embedder.losses.triplet"), ("captioners.core_registry", "captioners.cores"),
            ("capaware.cli", "eval.score_captions")} <= seen, sorted(seen)


def test_a_planted_string_cycle_is_named_by_file_and_line(tmp_path, monkeypatch):
    """``a`` imports ``b`` plainly; ``b`` loads ``a`` back by string, as the old backbone table did."""
    (tmp_path / "strpkg").mkdir()
    (tmp_path / "strpkg" / "__init__.py").write_text("")
    (tmp_path / "strpkg" / "a.py").write_text("from strpkg import b  # noqa\n\n\nclass A:\n    pass\n")
    (tmp_path / "strpkg" / "b.py").write_text("import importlib\n\n\ndef build():\n"
                                              "    return getattr(importlib.import_module('strpkg.a'), 'A')\n"
                                              "\n\nTABLE = {'x': 'strpkg.a:A'}\n")
    (tmp_path / "strpkg" / "c.py").write_text("TABLE = {'x': 'strpkg.b:build'}  # down only: fine\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    found = string_import_cycles(("strpkg",), tmp_path, cache_dir=None)
    assert found == ["strpkg/b.py:5: 'strpkg.a' closes a cycle: strpkg.a -> strpkg.b",
                     "strpkg/b.py:8: 'strpkg.a:A' closes a cycle: strpkg.a -> strpkg.b"], found
