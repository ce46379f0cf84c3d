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
