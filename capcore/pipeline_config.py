"""A pipeline config (``configs/*/pipeline_*.yaml``): the stage configs of one run, each with its overrides.

Read by capaware.pipeline_plan, which turns it into each stage's commands, and by ``capaware doctor
--config``, which checks what its stages need; so both read one schema.
"""
from __future__ import annotations

import shlex
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from capcore import plugins
from capcore.config import load_yaml
from capcore.errors import CapawareError


@dataclass
class PipelineConfig:
    """Each list entry is ``"CONFIG [key=value ...]"``: a stage config plus its own overrides."""
    name: str = "demo"
    run_dir: str = "runs/demo"
    stage1: list[str] = field(default_factory=list)  # retrieval studies; their datasets are the data stage
    features: list[str] = field(default_factory=list)  # stage-two feature files
    feature_sets: Optional[list[str]] = None  # data.features of each captioner; unset: every file that features
    # makes, by its name (features/img.h5 -> img): the sets are declared once, in the features configs (feature_sets_of)
    captioners: list[str] = field(default_factory=list)  # XE configs, each trained on every feature set
    joint: list[str] = field(default_factory=list)  # joint image-text spaces (joint/), each trained on every
    # feature set with XE's labels.h5 / vocab.json (after the captioners, before rl, which scores captions in them)
    rl: list[str] = field(default_factory=list)  # SCST configs, each started from its XE run
    report: bool = True
    meteor: str = "per_run"  # per_run: each XE and SCST run scores METEOR itself | at_scores: they leave it pending
    # and the scores stage scores every run in one METEOR process (eval.meteor_pending): one paraphrase-table load
    jobs: int = 1  # data, stage-one, captioner (XE) and SCST commands run this many at a time, sharing the cores
    stage_jobs: dict[str, int] = field(default_factory=dict)  # per stage (data, stage1, captioners, rl...), over jobs
    plugins: list[str] = field(default_factory=list)  # a user's modules or .py files every stage imports first
    # (capcore/plugins.py): their losses, formats and cores registered in every command the pipeline starts


METEOR_CHOICES = ("per_run", "at_scores")


def feature_sets_of(cfg: PipelineConfig, outs: list[str]) -> list[str]:
    """The feature sets every captioner trains on: the files the pipeline's features configs write (``outs``),
    each named by its file (``features/img.h5`` -> ``img``; its row label is the file's own, from its config:
    Img, Cap, or the config's ``label``). ``feature_sets:`` is for a choice among them, or for files a run
    already holds."""
    if cfg.feature_sets is not None:
        return list(cfg.feature_sets)
    if not outs and (cfg.captioners or cfg.joint or cfg.rl):
        raise CapawareError("feature_sets", "captioners to train but no features entry to train them on",
                            "add the features configs (stage two), or name the run's feature files: feature_sets: "
                            "[img, cap]")
    return [Path(out).stem for out in outs]


def jobs_of(cfg: PipelineConfig, stage: str) -> int:
    """How many of ``stage``'s commands run at once: its ``stage_jobs`` entry, else ``jobs``."""
    return max(1, int(cfg.stage_jobs.get(stage, cfg.jobs)))


def load_pipeline(path: str, run_dir: str | None) -> PipelineConfig:
    if not Path(path).is_file():
        raise CapawareError(path, "pipeline config not found", "pass one of configs/*/pipeline_*.yaml")
    try:
        cfg = OmegaConf.merge(OmegaConf.structured(PipelineConfig), load_yaml(path))
    except OmegaConfBaseException as err:
        raise CapawareError(path, f"bad pipeline key: {str(err).splitlines()[0]}",
                            "the valid keys are the fields of PipelineConfig in capcore/pipeline_config.py") from None
    if cfg.meteor not in METEOR_CHOICES:
        raise CapawareError(path, f"meteor: {cfg.meteor!r}", f"use one of {', '.join(METEOR_CHOICES)}")
    if run_dir:
        cfg.run_dir = run_dir
    cfg.plugins = plugins.load(list(cfg.plugins), Path(path).parent, path)
    return cfg


@dataclass
class Entry:
    config: str
    overrides: list[str]

    @classmethod
    def parse(cls, text: str, run_dir: str, extra: tuple[str, ...] = ()) -> "Entry":
        config, *overrides = shlex.split(text)
        if not Path(config).is_file():
            raise CapawareError(config, "stage config named by the pipeline config is missing",
                                "fix the path in the pipeline config")
        return cls(config, [f"run_dir={run_dir}", *extra, *overrides])

    def args(self) -> str:
        return " ".join(shlex.quote(a) for a in [self.config, *self.overrides])
