"""What capaware/pipeline.sh runs: ``python -m capaware.pipeline_plan CONFIG [--run DIR] ACTION [STAGE]``.

A pipeline config (``configs/*/pipeline_*.yaml``) lists the stage configs of one run; this script turns
it into the shell commands of each stage, the outputs a stage owns (for ``--force``) and a fingerprint
of everything a stage's result depends on (its commands, the bytes of its config files, and the
fingerprint of the stage before it), so the shell script stays a plain loop. Actions:

    validate               load every stage config through its stage's validator (pipeline.sh: first)
    preflight FROM TO [--force]  what the stages still to run in FROM..TO need (Java, weights, data, disk,
                           the caption graph's memory; LOCAL_WORLD_SIZE: ranks per machine): one line per
                           problem, exit 2; warnings (cores, network filesystems) do not stop it (capaware.preflight)
    stages                 the stage names, in order
    commands STAGE         one shell command per line
    outputs STAGE          the paths the stage writes (every one inside the run folder)
    fingerprint STAGE      a hash that changes when anything the stage depends on changes
    jobs STAGE             how many of the stage's commands may run at once
    parallel STAGE         yes when its commands train under torchrun with --nproc (stage1, captioners, rl)
    run-dir                the run folder
    tables                 the Markdown tables to print at the end, one path per line
"""
from __future__ import annotations

import argparse
import os
import hashlib
import shlex
import sys
from pathlib import Path

from capaware.stages import TABLE, Stage, load_with, names, stage_of
from capcore.config import config_files
from capcore.errors import CapawareError, run_cli
from capcore.pipeline_config import Entry, PipelineConfig, feature_sets_of, jobs_of, load_pipeline
from capcore.run_layout import RunDir

STAGES = names(TABLE)
PARALLEL_STAGES = tuple(s.name for s in TABLE if s.parallel)
"""Stages whose commands are independent (one dataset, study, feature file or captioner run each): ``jobs`` at a
time, each with its share of the cores (capaware/pipeline.sh)."""
DISTRIBUTED_STAGES = tuple(s.name for s in TABLE if s.distributed)
"""Stages whose commands train with capcore.distributed: under torchrun with ``capaware run --nproc``."""


class Plan:
    """A pipeline config resolved against the stage table (capaware.stages.TABLE, or a copy of it: ``table``):
    each stage's entries parsed once, and every per-stage question answered by the stage's own entry."""

    def __init__(self, cfg: PipelineConfig, table: tuple[Stage, ...] = TABLE):
        self.cfg, self.table = cfg, table
        self.run = cfg.run_dir
        r = self.run
        self.entries: dict[str, list[Entry]] = {s.name: [Entry.parse(e, r) for e in getattr(cfg, s.key)]
                                                for s in table if s.key and not s.per_feature_set}
        self.feature_sets = feature_sets_of(cfg, [self._features(e).out for e in self.features])
        self.entries.update({s.name: [x for e in getattr(cfg, s.key) for x in self._per_set(e)]
                             for s in table if s.key and s.per_feature_set})

    def _per_set(self, text: str) -> list[Entry]:
        return per_feature_set(text, self.run, self.feature_sets)

    def stage(self, name: str) -> Stage:
        return stage_of(name, self.table)

    def names(self) -> tuple[str, ...]:
        return names(self.table)

    def entries_of(self, stage: str) -> list[Entry]:
        """A stage's entries: its configs (each with the run folder and its overrides), per feature set where
        the stage trains on each."""
        return self.entries.get(stage, [])

    stage1 = property(lambda self: self.entries_of("stage1"))
    features = property(lambda self: self.entries_of("features"))
    captioners = property(lambda self: self.entries_of("captioners"))
    joint = property(lambda self: self.entries_of("joint"))
    rl = property(lambda self: self.entries_of("rl"))

    # -- what each stage runs: its entry in the stage table (capaware/stages.py) ---------------------------------
    def commands(self, stage: str) -> list[str]:
        return self.stage(stage).commands(self)

    def outputs(self, stage: str) -> list[str]:
        """What ``--force`` removes (the stage's entry says which paths), each checked to be inside the run."""
        paths = self.stage(stage).outputs(self)
        run = Path(self.run).resolve()
        for p in paths:
            if run not in Path(p).resolve().parents:
                raise CapawareError(p, f"stage {stage} writes outside the run folder {self.run}",
                                    "put every output of the stage configs under ${run_dir}")
        return paths

    def fingerprint(self, stage: str) -> str:
        h = hashlib.sha256()
        stages = self.names()
        for s in stages[:stages.index(stage) + 1]:
            commands = self.commands(s)
            if self.stage(s).added_later and not commands:
                continue  # a stage newer than the run folders: unused, it leaves their fingerprints as they were
            h.update(s.encode())
            for cmd in commands:
                h.update(cmd.replace(self.run, "$RUN").encode())  # a copied run folder keeps its stages
                for token in shlex.split(cmd):
                    if token.endswith((".yaml", ".yml")) and Path(token).is_file():
                        for path in config_files(token):  # the file and its defaults
                            h.update(path.read_bytes())
        return h.hexdigest()[:16]

    def tables(self) -> list[str]:
        return [t for s in self.table for t in s.tables(self)]

    def jobs(self, stage: str) -> int:
        """How many of the stage's commands run at once: ``jobs`` for a stage of independent commands, else 1."""
        return jobs_of(self.cfg, stage) if self.stage(stage).parallel else 1

    def validate(self) -> list[str]:
        """Load every stage config of the run through its own stage's validator (stage one, features, XE,
        SCST), so a bad value stops the pipeline before its first stage rather than hours into it."""
        n = 0
        for s in self.table:
            for e in self.entries_of(s.name) if s.loader else []:
                self.load(s.name, e)
                n += 1
        return [f"{n} stage configs (with their overrides) valid"]

    def pending(self, first: str, last: str, force: bool = False) -> list[str]:
        """The stages of first..last that capaware/pipeline.sh would run: forced, or no marker with this fingerprint."""
        stages = self.names()[self.names().index(first):self.names().index(last) + 1]
        marker = RunDir(self.run).root / ".pipeline"
        return [s for s in stages if force or not (marker / f"{s}.done").is_file()
                or (marker / f"{s}.done").read_text().strip() != self.fingerprint(s)]

    def preflight(self, first: str, last: str, force: bool = False) -> list[str]:
        from capaware.preflight import preflight, preflight_warnings

        pending = self.pending(first, last, force)
        stage1, features = [self._stage1(e) for e in self.stage1], [self._features(e) for e in self.features]
        captioners = [self.load("captioners", e) for e in self.captioners] if "captioners" in pending else []
        for line in preflight_warnings(pending, stage1, features, captioners):
            print(f"warning: {line}", file=sys.stderr)
        joint = [self.load("joint", e) for e in self.joint] if "joint" in pending else []
        rl = [self.load("rl", e) for e in self.rl] if "rl" in pending else []
        problems = preflight(pending, stage1, features, self.run, joint, rl)
        if problems:
            print("\n".join(f"error: {p}" for p in problems), file=sys.stderr)
            raise SystemExit(2)
        return []

    def longest_first(self) -> list[Entry]:
        """Stage-one entries, those that class-pretrain (and generate a pretraining set) first: with
        jobs > 1 the shorter ones then run beside the longest instead of after it."""
        return sorted(self.stage1, key=lambda e: self._stage1(e).model.init != "class-pretrained")

    # -- resolved stage configs -----------------------------------------------------------------
    def captioning_dir(self) -> str:
        return str(RunDir(self.run).captioning)

    def captioner_dirs(self, stage: str | None = None) -> list[str]:
        xe = [self.load("captioners", e).out_dir for e in self.captioners]
        rl = [self.load("rl", e).out_dir for e in self.rl]
        return {"captioners": xe, "rl": rl}.get(stage, xe + rl)

    def load(self, stage: str, e: Entry):
        """One of a stage's configs, through the stage's own loader (its validator), once per process."""
        return load_with(self.stage(stage).loader, e.config, tuple(e.overrides))

    def _stage1(self, e: Entry):
        return self.load("stage1", e)

    def _features(self, e: Entry):
        return self.load("features", e)


def per_feature_set(text: str, run: str, feature_sets: list[str]) -> list[Entry]:
    """A captioners' stage entry: once per feature set, or once on the set it names itself (an override
    ``data.features=img``: the demo's self-retrieval run, on one set). The plan and ``capaware plan`` both ask here."""
    entry = Entry.parse(text, run)
    if any(o.startswith("data.features=") for o in entry.overrides):
        return [entry]
    return [Entry.parse(text, run, (f"data.features={f}",)) for f in feature_sets]


def features_of(entry: Entry) -> str:
    """The feature set an entry of :func:`per_feature_set` runs on (its last ``data.features`` override)."""
    return [o.split("=", 1)[1] for o in entry.overrides if o.startswith("data.features=")][-1]


def main(argv: list[str] | None = None, table: tuple[Stage, ...] = TABLE) -> None:
    """The actions above; ``table``: the stages (a copy of capaware.stages.TABLE in tests/capaware/test_stages.py)."""
    stages = names(table)
    parser = argparse.ArgumentParser(prog="python -m capaware.pipeline_plan", description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--run", default=None, help="run folder (overrides run_dir of the pipeline config)")
    parser.add_argument("action", choices=("stages", "commands", "outputs", "fingerprint", "run-dir", "tables", "jobs",
                                           "validate", "preflight", "parallel", "plugins"))
    parser.add_argument("stage", nargs="?", choices=stages)
    parser.add_argument("last", nargs="?", choices=stages, help="preflight: the last stage of the range")
    parser.add_argument("--force", action="store_true", help="preflight: every stage of the range will run")
    args = parser.parse_args(argv)
    plan = Plan(load_pipeline(args.config, args.run), table)
    if args.action in ("commands", "outputs", "fingerprint", "jobs", "parallel") and not args.stage:
        parser.error(f"{args.action} needs a STAGE")
    lines = {"stages": lambda: list(stages), "run-dir": lambda: [plan.run], "tables": plan.tables,
             "commands": lambda: plan.commands(args.stage), "outputs": lambda: plan.outputs(args.stage),
             "fingerprint": lambda: [plan.fingerprint(args.stage)], "validate": plan.validate,
             "preflight": lambda: plan.preflight(args.stage or stages[0], args.last or stages[-1], args.force),
             "jobs": lambda: [str(plan.jobs(args.stage))],
             "parallel": lambda: ["yes" if plan.stage(args.stage).distributed else "no"],
             "plugins": lambda: [os.pathsep.join(plan.cfg.plugins)] if plan.cfg.plugins else []}[args.action]()
    if lines:
        print("\n".join(lines))


if __name__ == "__main__":
    run_cli(main)
