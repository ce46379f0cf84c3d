"""The ``capaware`` command: one entry point for the jobs users of the toolkit have.

    capaware demo                        the whole pipeline on the embedded default (make demo)
    capaware run CONFIG [--from S] ...   the staged pipeline of a pipeline config (capaware/pipeline.sh)
    capaware caption --model M IMAGES    caption your own images with an exported model
    capaware export RUN/captioners/NAME  pack a trained captioner into one .capaware file
    capaware score --preds P --refs R    BLEU/METEOR/ROUGE-L/CIDEr-D/SPICE (eval.score_captions)
    capaware grounding RUN/captioners/N  CIDEr-D on real vs shuffled features (eval.grounding)
    capaware plan CONFIG                 each stage's time, disk and peak memory on this machine, before a run
    capaware doctor                      what this machine has: Java, METEOR, SPICE, torch, weights

``score``, ``grounding`` and ``doctor`` hand their arguments to the ``python -m`` module that does the
job (which keeps working on its own); ``demo`` and ``run`` run the staged pipeline (capaware/pipeline.sh,
planned by capaware.pipeline_plan, each stage's work by capaware.stage), from an editable or a plain install.
"""
from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Callable

from capaware.stages import TABLE, Stage, names
from capcore.errors import CapawareError, run_cli

CHECKOUT = Path(__file__).resolve().parents[1]
PIPELINE = Path(__file__).with_name("pipeline.sh")


@dataclass(frozen=True)
class Command:
    summary: str
    example: str
    run: Callable[[list[str]], int | None]
    usage: str = ""  # the shell scripts' usage (the Python commands print their argparse help)


def project_folder() -> Path:
    """Where the pipeline runs, and what the paths inside its configs are relative to: the checkout capaware is
    installed from (an editable install; the shipped configs name their files from it), else the directory
    you are in (a non-editable install: your own configs)."""
    if (CHECKOUT / "configs").is_dir() and (CHECKOUT / "pyproject.toml").is_file():
        return CHECKOUT
    return Path.cwd()


def pipeline(args: list[str]) -> int:
    """Run the staged pipeline (capaware/pipeline.sh, shipped in the package) with this interpreter first on
    PATH: every command it plans starts ``python``, which must be the one capaware is installed in."""
    path = f"{Path(sys.executable).parent}{os.pathsep}{os.environ.get('PATH', '')}"
    return subprocess.call(["bash", str(PIPELINE), *args], cwd=project_folder(), env=dict(os.environ, PATH=path))


def demo(args: list[str]) -> int:
    config = CHECKOUT / "configs" / "demo" / "pipeline_demo.yaml"
    if not config.is_file():
        raise CapawareError(config, "not found: the demo's configs come with a checkout of capaware",
                            "git clone it and run `make demo` there, or `capaware run` your own pipeline config")
    return pipeline([str(config.relative_to(CHECKOUT)), *from_here(args, config_first=False)])


def from_here(args: list[str], config_first: bool) -> list[str]:
    """Paths typed on the command line, made absolute against the directory the user is in (the pipeline
    runs in the checkout): the pipeline CONFIG where that file exists there, and --run DIR always. Paths
    inside configs stay relative to the checkout, as the shipped configs are written."""
    out = list(args)
    if config_first and out and not out[0].startswith("-") and Path(out[0]).is_file():
        out[0] = str(Path(out[0]).resolve())
    for i in range(len(out) - 1):
        if out[i] == "--run":
            out[i + 1] = str(Path(out[i + 1]).resolve())
    return out


def run_summary(table: tuple[Stage, ...] = TABLE) -> str:
    """``capaware run``'s line in the overview: its stages, read from the stage table (capaware/stages.py)."""
    return f"the staged pipeline of a pipeline config: {' '.join(names(table))}"


def delegate(module: str, prog: str) -> Callable[[list[str]], int | None]:
    """A subcommand that is a ``python -m`` module's main, its help titled ``capaware <prog>``."""
    def call(args: list[str]) -> int | None:
        import importlib

        main = importlib.import_module(module).main
        sys.argv[0] = f"capaware {prog}"  # argparse's usage line
        return main(args)
    return call


COMMANDS = {
    "demo": Command("the whole pipeline on the embedded default, every output under runs/demo (make demo)",
                    "capaware demo   # or: capaware demo --from captioners --force",
                    demo,
                    "capaware demo [--from STAGE] [--to STAGE] [--force] [--run DIR]"),
    "run": Command(run_summary(),
                   "capaware run configs/paper/pipeline_paper.yaml --from features --to captioners",
                   lambda a: pipeline(from_here(a, config_first=True)),
                   "capaware run CONFIG [--from STAGE] [--to STAGE] [--force] [--run DIR]\n"
                   "                    [--nproc N [--nnodes M --node-rank R --rdzv-endpoint HOST:PORT]]\n"
                   "  --nproc: stage one, XE and SCST under torchrun with N processes per machine\n"
                   "  a finished stage with the same inputs is skipped; a killed run resumes; --force redoes\n"
                   "  CONFIG and --run DIR are taken from the directory you are in; paths inside configs\n"
                   "  (data folders, stage configs, a config's run_dir) from the capaware checkout when\n"
                   "  capaware is installed from one (pip install -e), else from the directory you are in"),
    "caption": Command("caption your own images (files or folders) with an exported .capaware model",
                       "capaware caption --model model.capaware photos/ --out preds.json --attention att/",
                       delegate("capaware.caption_cli", "caption")),
    "export": Command("pack a trained captioner, its backbone and preprocessing into one .capaware file",
                      "capaware export runs/demo/captioners/cap_topdown_scst -o model.capaware",
                      delegate("capaware.export_cli", "export")),
    "score": Command("score captions with pycocoevalcap: BLEU-4, METEOR, ROUGE-L, CIDEr-D, SPICE",
                     "capaware score --preds preds.json --refs dataset_coco.json --split test",
                     delegate("eval.score_captions", "score")),
    "grounding": Command("does the captioner look at its image? CIDEr-D with real vs shuffled features",
                         "capaware grounding runs/demo/captioners/cap_topdown",
                         delegate("eval.grounding", "grounding")),
    "plan": Command("what a pipeline will cost here before it runs: each stage's time, disk and peak memory",
                    "capaware plan configs/paper/pipeline_coco.yaml --counts 113287,5000,5000",
                    delegate("capaware.plan", "plan")),
    "doctor": Command("what this machine has for capaware: Java, METEOR, SPICE, torch, CPU/GPU, weights",
                      "capaware doctor --quick", delegate("capaware.doctor", "doctor")),
}


def overview() -> str:
    width = max(map(len, COMMANDS))
    lines = [f"  {name:{width}s}  {c.summary}" for name, c in COMMANDS.items()]
    return ("usage: capaware COMMAND [ARGS...]   (capaware COMMAND --help: its options and an example)\n\n"
            "commands:\n" + "\n".join(lines) + "\n")


def main(argv: list[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help", "help"):
        print(overview(), end="")
        return 0 if args else 2
    name, rest = args[0], args[1:]
    if name not in COMMANDS:
        raise CapawareError("command line", f"unknown command {name!r}", f"use one of {', '.join(COMMANDS)}")
    command = COMMANDS[name]
    if rest[:1] in (["-h"], ["--help"]):
        print(f"capaware {name}: {command.summary}\nexample: {command.example}\n", flush=True)
        if command.usage:
            print(f"usage: {command.usage}")
            return 0
    status = command.run(rest)
    return int(status or 0)


def entry() -> None:
    """The console script: one line for a CapawareError (exit 2), the job's exit status otherwise."""
    status = 0

    def call() -> None:
        nonlocal status
        status = main()
    run_cli(call)
    sys.exit(status)

