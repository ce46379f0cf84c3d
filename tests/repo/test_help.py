"""Every command the docs run answers ``--help`` (issue #58: ``python -m capaware.stage data --help`` answered
"config file not found"): each ``python -m MODULE`` that README and docs/ name, every ``capaware.stage`` kind and
every ``capaware`` subcommand print their usage and exit 0, without starting any work.

Run in this process (``runpy``, as ``python -m`` runs a module): a subprocess per command would spend its seconds
importing torch.
"""
from __future__ import annotations

import contextlib
import io
import runpy
import sys

import pytest

from capaware.stage import KINDS
from tests.repo.test_doc_names import documents, named_modules

SUBCOMMANDS = ("demo", "run", "caption", "export", "score", "grounding", "plan", "doctor")
pytestmark = pytest.mark.filterwarnings("ignore:.*found in sys.modules:RuntimeWarning")  # runpy on a module
COMMANDS = sorted({m for doc in documents() for m in named_modules(doc)} - {"capaware", "capaware.stage"})


def help_of(module: str, args: list[str], monkeypatch) -> str:
    """What ``python -m MODULE ARGS --help`` prints; fails unless it exits with status 0."""
    monkeypatch.setattr(sys, "argv", [module, *args, "--help"])
    out = io.StringIO()
    code = 0
    with contextlib.redirect_stdout(out), contextlib.redirect_stderr(out):
        try:
            runpy.run_module(module, run_name="__main__", alter_sys=True)
        except SystemExit as stop:
            code = stop.code
    assert code in (0, None), f"python -m {module} {' '.join(args)} --help exited {code}: {out.getvalue()[-300:]}"
    return out.getvalue()


@pytest.mark.parametrize("module", COMMANDS)
def test_every_module_the_docs_run_answers_help(module, monkeypatch):
    assert len(help_of(module, [], monkeypatch).strip()) > 40  # a usage line, or the module's own description


@pytest.mark.parametrize("kind", KINDS)
def test_every_stage_kind_answers_help(kind, monkeypatch):
    usage = "python -m capaware.stage {data,stage1,features,xe,joint,scst} CONFIG"
    assert usage in help_of("capaware.stage", [kind], monkeypatch)
    with_config = help_of("capaware.stage", [kind, "configs/demo/demo_caption.yaml"], monkeypatch)
    assert "usage:" in with_config or "python -m capaware.stage" in with_config  # the kind's own options, if any


@pytest.mark.parametrize("sub", SUBCOMMANDS)
def test_every_capaware_subcommand_answers_help(sub, monkeypatch):
    assert f"capaware {sub}" in help_of("capaware", [sub], monkeypatch)
