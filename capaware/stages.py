"""The pipeline's stages, in one table (issue #66): what each one runs, writes, validates and prints.

Before this table a new stage touched about nine places: the stage list and three if-chains of
capaware.pipeline_plan (commands, outputs, tables), the load of its configs, capaware.stage's dispatch, the
planner (capaware.plan), the preflight (capaware.preflight) and the ``capaware run`` help (capaware.cli). They
now read ``TABLE``: a stage is one ``Stage`` entry, placed where it runs, plus the list of its stage configs
in ``PipelineConfig`` (capcore.pipeline_config: the schema lives in capcore, below capaware, so it cannot read
this table; tests/capaware/test_stages.py checks every ``key`` here is one of its lists).

Each entry's functions take the run's ``capaware.pipeline_plan.Plan`` (its resolved entries and helpers), so
that this module imports nothing heavy: ``capaware --help`` and ``python -m capaware.stage`` read it too.
"""
from __future__ import annotations

import functools
import importlib
import shlex
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Callable

from capcore.errors import CapawareError
from capcore.run_layout import RunDir

PY = "python"
STAGE_CMD = f"{PY} -m capaware.stage"  # capaware/stage.py: one stage config's work in one process


def _none(plan: Any) -> list[str]:
    return []


@dataclass(frozen=True)
class Stage:
    """One stage of capaware/pipeline.sh.

    ``key``: the PipelineConfig list of its stage configs (``"CONFIG [key=value ...]"`` entries; None: it has
    none of its own); ``loader``: ``module:function`` that loads one of them (its validator: ``validate`` and
    the plan load every entry through it); ``per_feature_set``: each entry is repeated for every feature set
    (``data.features=F``, the captioners trained on each feature file). ``parallel``: its commands are
    independent (one dataset, study, feature file or run each), so ``jobs`` run at a time; ``distributed``: its
    commands train with capcore.distributed, under torchrun with ``capaware run --nproc``. ``kind`` and ``run``:
    the ``python -m capaware.stage KIND`` its commands start and the ``module:function(config, args)`` that does
    it; ``kind_options``: that function parses options of its own (``KIND CONFIG --help`` shows them).
    ``java``: its commands score captions with the Java tools (the preflight checks for Java). ``estimate``:
    the capaware.plan.Planner method (called with the stage's name) that prices it for ``capaware plan``.
    ``added_later``: see the field (capaware.pipeline_plan.Plan.fingerprint).
    ``commands``, ``outputs``, ``tables``: given the Plan, the shell commands it runs, the paths it writes (what
    ``--force`` removes) and the Markdown tables the pipeline prints at its end."""
    name: str
    commands: Callable[[Any], list[str]]
    outputs: Callable[[Any], list[str]]
    tables: Callable[[Any], list[str]] = _none
    key: str | None = None
    loader: str | None = None
    per_feature_set: bool = False
    parallel: bool = False
    distributed: bool = False
    kind: str | None = None
    run: str | None = None
    kind_options: bool = False
    java: bool = False
    estimate: str | None = None
    added_later: bool = False  # a stage added to the table after runs were made: while a pipeline config gives
    # it no commands it adds nothing to the fingerprints after it, so those runs' later stages stay done


# -- what each stage runs and writes (the Plan's resolved entries in, shell commands and paths out) -------------

def _later(plan) -> str:
    """The prefix that leaves METEOR pending for the scores stage (``meteor: at_scores``); CAPAWARE_METEOR=off wins."""
    return "CAPAWARE_METEOR=${CAPAWARE_METEOR:-later} " if plan.cfg.meteor == "at_scores" else ""


def data_commands(plan) -> list[str]:
    seen, out = set(), []  # one command per dataset folder: a class-pretraining set is a command of
    for e in plan.longest_first():  # its own, so that it is generated beside the track sets
        c = plan._stage1(e)
        pretrain = c.pretrain.data.root if c.pretrain.data is not None and c.model.init == "class-pretrained" \
            else None
        for root, only in ((pretrain, "pretrain"), (c.data.root, "track")):
            if root is not None and root not in seen:
                seen.add(root)
                out.append(f"{STAGE_CMD} data {e.args()} --only {only}")
    return out


def data_outputs(plan) -> list[str]:
    """The data stage only owns generated (synthetic) datasets."""
    cfgs = list(map(plan._stage1, plan.stage1))
    paths = [c.data.root for c in cfgs if c.data.synthetic is not None]
    return paths + [c.pretrain.data.root for c in cfgs if c.pretrain.data is not None
                    and c.pretrain.data.synthetic is not None and c.model.init == "class-pretrained"]


def stage1_outputs(plan) -> list[str]:
    return [p for c in map(plan._stage1, plan.stage1) for p in (c.out_dir, str(RunDir(c.run_dir).results(c.name)))]


def stage1_tables(plan) -> list[str]:
    return [str(RunDir(c.run_dir).retrieval_md(c.name)) for c in map(plan._stage1, plan.stage1)]


def scores_commands(plan) -> list[str]:
    runs = " ".join(shlex.quote(d) for d in plan.captioner_dirs())
    out = [f"{PY} -m eval.meteor_pending {runs}"] if runs and _later(plan) else []  # one METEOR for every run
    joints = " ".join(f"--joint {shlex.quote(str(Path(c.out_dir) / 'best.pt'))}" for c in _joint_configs(plan))
    out += [f"{PY} -m eval.self_retrieval {runs} {joints}"] if runs and joints else []  # Table 1's SR columns
    out += ([f"{PY} -m eval.reporting.results_table {runs} --out {shlex.quote(plan.captioning_dir())}"]
            if runs else [])
    for folder in dict.fromkeys(str(Path(d).parent) for d in plan.captioner_dirs("rl")):
        out.append(f"{PY} -m eval.reporting.scst_gains {shlex.quote(folder)} "
                   f"--out {shlex.quote(str(RunDir(plan.run).scst_gains_md))}")
    return out


def scores_tables(plan) -> list[str]:
    out = [str(RunDir(plan.run).captioning_md)] if plan.captioner_dirs() else []
    return out + ([str(RunDir(plan.run).scst_gains_md)] if plan.rl else [])


def report_commands(plan) -> list[str]:
    if not plan.cfg.report:
        return []
    report = shlex.quote(str(RunDir(plan.run).report))
    return [f"{PY} -m eval.reporting.report --run {shlex.quote(plan.run)} --out {report}",
            f"{PY} -m eval.reporting.check {report}/index.html --if-available"]


def each_entry(kind: str, stage: str, prefix: Callable[[Any], str] = lambda plan: "") -> Callable[[Any], list[str]]:
    """The commands of a stage that runs ``python -m capaware.stage KIND`` on each of its entries, in order."""
    def commands(plan) -> list[str]:
        return [f"{prefix(plan)}{STAGE_CMD} {kind} {e.args()}" for e in plan.entries_of(stage)]
    return commands


def stage1_commands(plan) -> list[str]:
    return [f"{STAGE_CMD} stage1 {e.args()}" for e in plan.longest_first()]


def features_outputs(plan) -> list[str]:
    return [plan._features(e).out for e in plan.features]


def captioners_outputs(plan) -> list[str]:
    return plan.captioner_dirs("captioners")


def _joint_configs(plan) -> list:
    return [plan.load("joint", e) for e in plan.entries_of("joint")]


def joint_outputs(plan) -> list[str]:
    from joint.config import results_paths  # torch-free

    return [str(p) for c in _joint_configs(plan) for p in (c.out_dir, *results_paths(c))]


def joint_tables(plan) -> list[str]:
    from joint.config import results_paths

    return [str(results_paths(c)[1]) for c in _joint_configs(plan)]


def rl_outputs(plan) -> list[str]:
    return plan.captioner_dirs("rl")


def scores_outputs(plan) -> list[str]:
    return [plan.captioning_dir()]


def report_outputs(plan) -> list[str]:
    return [str(RunDir(plan.run).report)]


# -- the table --------------------------------------------------------------------------------------------------

TABLE: tuple[Stage, ...] = (
    Stage("data", data_commands, data_outputs, parallel=True,
          kind="data", run="capaware.stage_runners:data", kind_options=True, estimate="data"),
    Stage("stage1", stage1_commands, stage1_outputs, stage1_tables,
          key="stage1", loader="embedder.config:load_config", parallel=True, distributed=True,
          kind="stage1", run="capaware.stage_runners:stage_one", kind_options=True, estimate="stage_one"),
    Stage("features", each_entry("features", "features"), features_outputs,
          key="features", loader="feature_extract.config:load_features_config", parallel=True,
          kind="features", run="capaware.stage_runners:features", kind_options=True, estimate="feature_dumps"),
    Stage("captioners", each_entry("xe", "captioners", _later), captioners_outputs,
          key="captioners", loader="captioners.config:load_captioner_config", per_feature_set=True, parallel=True,
          distributed=True, kind="xe", run="capaware.stage_runners:xe", java=True, estimate="captioners"),
    Stage("joint", each_entry("joint", "joint"), joint_outputs, joint_tables,
          key="joint", loader="joint.config:load_joint_config", per_feature_set=True, parallel=True,
          kind="joint", run="capaware.stage_runners:joint", estimate="joint", added_later=True),
    Stage("rl", each_entry("scst", "rl", _later), rl_outputs,
          key="rl", loader="rl.config:load_scst_config", per_feature_set=True, parallel=True,
          distributed=True, kind="scst", run="capaware.stage_runners:scst", java=True, estimate="captioners"),
    Stage("scores", scores_commands, scores_outputs, scores_tables),
    Stage("report", report_commands, report_outputs),
)
"""The stages in the order capaware/pipeline.sh runs them (a stage's fingerprint covers every stage before it)."""


def names(table: tuple[Stage, ...] = TABLE) -> tuple[str, ...]:
    return tuple(s.name for s in table)


def stage_of(name: str, table: tuple[Stage, ...] = TABLE) -> Stage:
    for s in table:
        if s.name == name:
            return s
    raise CapawareError("stage", f"unknown stage {name!r}", f"use one of {', '.join(names(table))}")


def kinds(table: tuple[Stage, ...] = TABLE) -> dict[str, Stage]:
    """``python -m capaware.stage`` KIND -> its stage, in the table's order."""
    return {s.kind: s for s in table if s.kind}


def resolve(target: str) -> Callable:
    """A ``module:function`` of the table, imported when it is called (not when the table is read)."""
    module, _, name = target.partition(":")
    return getattr(importlib.import_module(module), name)


@functools.lru_cache(maxsize=None)
def load_with(loader: str, config: str, overrides: tuple[str, ...]):
    """A stage config through its stage's own loader (``Stage.loader``), once per process: a fingerprint needs
    every stage's commands up to it, so ``preflight`` would otherwise load each config a dozen times (read,
    never changed)."""
    return resolve(loader)(config, list(overrides))
