"""The layer contracts of .importlinter hold (docs/design.md, "Folder roles and layers")."""
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


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


PACKAGES = ("capcore", "capdata", "embedder", "feature_extract", "captioners", "rl", "eval")


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
