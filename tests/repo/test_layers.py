"""The layer contracts of .importlinter hold (docs/design.md, "Folder roles and layers"), no module cycle, and no
function over 60 lines outside tests and benchmarks (issue #38)."""
import ast
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def test_import_layers_hold():
    lint = Path(sys.executable).with_name("lint-imports")
    done = subprocess.run([str(lint)], cwd=ROOT, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "1 kept, 0 broken" in done.stdout


def test_a_broken_layer_is_caught():
    """The contract is not vacuous: a stage-one module importing stage three breaks it."""
    probe = ROOT / "embedder" / "_layer_probe.py"
    probe.write_text("import captioners.model  # noqa: F401\n")
    try:
        lint = Path(sys.executable).with_name("lint-imports")
        done = subprocess.run([str(lint), "--config", str(ROOT / ".importlinter")], cwd=ROOT,
                              capture_output=True, text=True, timeout=120)
    finally:
        probe.unlink()
    assert done.returncode != 0 and "embedder._layer_probe -> captioners.model" in done.stdout


PACKAGES = ("studies", "capaware", "capcore", "capdata", "embedder", "joint", "feature_extract", "captioners", "rl",
            "eval")


def import_cycles(graph) -> list[list[str]]:
    """Strongly connected groups of more than one module in grimp's import graph (Tarjan), so function-local
    imports count too: a cycle dodged by importing inside a function is still a cycle."""
    index, low, stack, on_stack, cycles = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on_stack.add(v)
        for w in graph.find_modules_directly_imported_by(v):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on_stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            group = []
            while True:
                w = stack.pop()
                on_stack.discard(w)
                group.append(w)
                if w == v:
                    break
            if len(group) > 1:
                cycles.append(sorted(group))

    for module in sorted(graph.modules):
        if module not in index:
            visit(module)
    return cycles


def test_no_module_imports_itself_through_others():
    grimp = __import__("grimp")
    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10000))
    assert import_cycles(grimp.build_graph(*PACKAGES)) == []


def test_the_cycle_check_sees_a_planted_cycle(tmp_path, monkeypatch):
    for name, other in (("cyc_a", "cyc_b"), ("cyc_b", "cyc_a")):
        (tmp_path / "cycpkg").mkdir(exist_ok=True)
        (tmp_path / "cycpkg" / f"{name}.py").write_text(f"def f():\n    from cycpkg import {other}  # noqa\n")
    (tmp_path / "cycpkg" / "__init__.py").write_text("")
    monkeypatch.syspath_prepend(str(tmp_path))
    grimp = __import__("grimp")
    assert import_cycles(grimp.build_graph("cycpkg")) == [["cycpkg.cyc_a", "cycpkg.cyc_b"]]



@pytest.mark.parametrize("init_line", ["from initpkg import sub  # noqa\n",
                                       "from initpkg.sub import helper  # noqa\n"])
def test_the_cycle_check_sees_a_package_init_cycle(tmp_path, monkeypatch, init_line):
    """Issue #38's kind: a package's ``__init__`` imports its submodule, and the submodule imports a name from the
    package itself (so from ``__init__``). grimp records the submodule -> package edge, so the check sees it."""
    (tmp_path / "initpkg").mkdir()
    (tmp_path / "initpkg" / "__init__.py").write_text(init_line + "other_name = 1\n")
    (tmp_path / "initpkg" / "sub.py").write_text("from initpkg import other_name  # noqa\n\n\ndef helper():\n"
                                                 "    return other_name\n")
    (tmp_path / "initpkg" / "leaf.py").write_text("from initpkg import sub  # noqa\n")
    monkeypatch.syspath_prepend(str(tmp_path))
    grimp = __import__("grimp")
    assert import_cycles(grimp.build_graph("initpkg", cache_dir=None)) == [["initpkg", "initpkg.sub"]]


SOURCE_FOLDERS = ("capaware", "capcore", "capdata", "embedder", "joint", "feature_extract", "captioners", "rl",
                  "eval", "scripts", "studies")
MAX_FUNCTION_LINES = 60


def long_functions(paths, limit: int = MAX_FUNCTION_LINES, root: Path | None = None) -> list[str]:
    """``path:line name length`` for every function or method (nested ones too) of ``paths`` longer than
    ``limit`` lines, counted from its ``def`` line to its last line; paths are shown relative to ``root``."""
    found = []
    for path in paths:
        path = Path(path)
        tree = ast.parse(path.read_text(encoding="utf-8"), str(path))
        shown = path.relative_to(root) if root else path
        for node in ast.walk(tree):
            if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
                length = node.end_lineno - node.lineno + 1
                if length > limit:
                    found.append(f"{shown}:{node.lineno} {node.name} {length}")
    return sorted(found)


def test_no_function_over_60_lines():
    paths = [p for folder in SOURCE_FOLDERS for p in sorted((ROOT / folder).rglob("*.py"))]
    assert paths, "no source files found"
    found = long_functions(paths, root=ROOT)
    assert found == [], "functions over 60 lines; split them into helpers:\n" + "\n".join(found)


def test_the_length_check_sees_a_61_line_function(tmp_path):
    """A 61-line method is reported (def line to last line), a 60-line function is not."""
    lines = "".join(f"        x{n} = {n}\n" for n in range(59))
    (tmp_path / "long.py").write_text("class C:\n    def too_long(self):\n" + lines + "        return 0\n")
    (tmp_path / "ok.py").write_text("def just_60():\n" + lines[:-len("        x58 = 58\n")].replace("        ", "    ")
                                    + "    return 0\n")
    assert long_functions([tmp_path / "ok.py"]) == []
    assert long_functions([tmp_path / "long.py"]) == [f"{tmp_path / 'long.py'}:2 too_long 61"]
