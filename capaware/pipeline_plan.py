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
import functools
import hashlib
import shlex
import sys
from pathlib import Path

from capcore.config import config_files
from capcore.errors import CapawareError, run_cli
from capcore.pipeline_config import Entry, PipelineConfig, feature_sets_of, jobs_of, load_pipeline
from capcore.run_layout import RunDir

STAGES = ("data", "stage1", "features", "captioners", "rl", "scores", "report")
PARALLEL_STAGES = ("data", "stage1", "features", "captioners", "rl")
"""Stages whose commands are independent (one dataset, study, feature file or captioner run each): ``jobs`` at a
time, each with its share of the cores (capaware/pipeline.sh)."""
DISTRIBUTED_STAGES = ("stage1", "captioners", "rl")
"""Stages whose commands train with capcore.distributed: under torchrun with ``capaware run --nproc``."""


class Plan:
    def __init__(self, cfg: PipelineConfig):
        self.cfg = cfg
        self.run = cfg.run_dir
        r = self.run
        self.stage1 = [Entry.parse(e, r) for e in cfg.stage1]
        self.features = [Entry.parse(e, r) for e in cfg.features]
        self.feature_sets = feature_sets_of(cfg, [self._features(e).out for e in self.features])
        sets = self.feature_sets
        self.captioners = [Entry.parse(e, r, (f"data.features={f}",)) for e in cfg.captioners for f in sets]
        self.rl = [Entry.parse(e, r, (f"data.features={f}",)) for e in cfg.rl for f in sets]

    # -- what each stage runs -------------------------------------------------------------------
    def commands(self, stage: str) -> list[str]:
        py = "python"
        stage_cmd = f"{py} -m capaware.stage"  # capaware/stage.py: one stage config's work in one process
        if stage == "data":
            seen, out = set(), []  # one command per dataset folder: a class-pretraining set is a command of
            for e in self.longest_first():  # its own, so that it is generated beside the track sets
                c = self._stage1(e)
                pretrain = c.pretrain.data.root if c.pretrain.data is not None and c.model.init == "class-pretrained" \
                    else None
                for root, only in ((pretrain, "pretrain"), (c.data.root, "track")):
                    if root is not None and root not in seen:
                        seen.add(root)
                        out.append(f"{stage_cmd} data {e.args()} --only {only}")
            return out
        if stage == "stage1":
            return [f"{stage_cmd} stage1 {e.args()}" for e in self.longest_first()]
        if stage == "features":
            return [f"{stage_cmd} features {e.args()}" for e in self.features]
        later = "CAPAWARE_METEOR=${CAPAWARE_METEOR:-later} " if self.cfg.meteor == "at_scores" else ""  # off wins
        if stage == "captioners":
            return [f"{later}{stage_cmd} xe {e.args()}" for e in self.captioners]
        if stage == "rl":
            return [f"{later}{stage_cmd} scst {e.args()}" for e in self.rl]
        if stage == "scores":
            runs = " ".join(shlex.quote(d) for d in self.captioner_dirs())
            out = [f"{py} -m eval.meteor_pending {runs}"] if runs and later else []  # one METEOR for every run
            out += ([f"{py} -m eval.reporting.results_table {runs} --out {shlex.quote(self.captioning_dir())}"]
                    if runs else [])
            for folder in dict.fromkeys(str(Path(d).parent) for d in self.captioner_dirs("rl")):
                out.append(f"{py} -m eval.reporting.scst_gains {shlex.quote(folder)} "
                           f"--out {shlex.quote(str(RunDir(self.run).scst_gains_md))}")
            return out
        if stage == "report":
            if not self.cfg.report:
                return []
            report = shlex.quote(str(RunDir(self.run).report))
            return [f"{py} -m eval.reporting.report --run {shlex.quote(self.run)} --out {report}",
                    f"{py} -m eval.reporting.check {report}/index.html --if-available"]
        raise CapawareError("stage", f"unknown stage {stage!r}", f"use one of {', '.join(STAGES)}")

    def outputs(self, stage: str) -> list[str]:
        """What ``--force`` removes; the data stage only owns generated (synthetic) datasets."""
        if stage == "data":
            cfgs = list(map(self._stage1, self.stage1))
            paths = [c.data.root for c in cfgs if c.data.synthetic is not None]
            paths += [c.pretrain.data.root for c in cfgs if c.pretrain.data is not None
                      and c.pretrain.data.synthetic is not None and c.model.init == "class-pretrained"]
        elif stage == "stage1":
            paths = [p for c in map(self._stage1, self.stage1)
                     for p in (c.out_dir, str(RunDir(c.run_dir).results(c.name)))]
        elif stage == "features":
            paths = [self._features(e).out for e in self.features]
        elif stage in ("captioners", "rl"):
            paths = self.captioner_dirs(stage)
        elif stage == "scores":
            paths = [self.captioning_dir()]
        else:
            paths = [str(RunDir(self.run).report)]
        run = Path(self.run).resolve()
        for p in paths:
            if run not in Path(p).resolve().parents:
                raise CapawareError(p, f"stage {stage} writes outside the run folder {self.run}",
                                    "put every output of the stage configs under ${run_dir}")
        return paths

    def fingerprint(self, stage: str) -> str:
        h = hashlib.sha256()
        for s in STAGES[:STAGES.index(stage) + 1]:
            h.update(s.encode())
            for cmd in self.commands(s):
                h.update(cmd.replace(self.run, "$RUN").encode())  # a copied run folder keeps its stages
                for token in shlex.split(cmd):
                    if token.endswith((".yaml", ".yml")) and Path(token).is_file():
                        for path in config_files(token):  # the file and its defaults
                            h.update(path.read_bytes())
        return h.hexdigest()[:16]

    def tables(self) -> list[str]:
        out = [str(RunDir(c.run_dir).retrieval_md(c.name)) for c in map(self._stage1, self.stage1)]
        out += [str(RunDir(self.run).captioning_md)] if self.captioner_dirs() else []
        return out + ([str(RunDir(self.run).scst_gains_md)] if self.rl else [])

    def validate(self) -> list[str]:
        """Load every stage config of the run through its own stage's validator (stage one, features, XE,
        SCST), so a bad value stops the pipeline before its first stage rather than hours into it."""
        for e in self.stage1:
            self._stage1(e)
        for e in self.features:
            self._features(e)
        for kind in ("captioners", "rl"):
            for e in getattr(self, kind):
                load_stage_config(kind, e.config, tuple(e.overrides))
        n = len(self.stage1) + len(self.features) + len(self.captioners) + len(self.rl)
        return [f"{n} stage configs (with their overrides) valid"]

    def pending(self, first: str, last: str, force: bool = False) -> list[str]:
        """The stages of first..last that capaware/pipeline.sh would run: forced, or no marker with this fingerprint."""
        stages = STAGES[STAGES.index(first):STAGES.index(last) + 1]
        marker = RunDir(self.run).root / ".pipeline"
        return [s for s in stages if force or not (marker / f"{s}.done").is_file()
                or (marker / f"{s}.done").read_text().strip() != self.fingerprint(s)]

    def preflight(self, first: str, last: str, force: bool = False) -> list[str]:
        from capaware.preflight import preflight, preflight_warnings

        pending = self.pending(first, last, force)
        stage1, features = [self._stage1(e) for e in self.stage1], [self._features(e) for e in self.features]
        captioners = [load_stage_config("captioners", e.config, tuple(e.overrides)) for e in self.captioners
                      ] if "captioners" in pending else []
        for line in preflight_warnings(pending, stage1, features, captioners):
            print(f"warning: {line}", file=sys.stderr)
        problems = preflight(pending, stage1, features, self.run)
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
        xe = [load_stage_config("captioners", e.config, tuple(e.overrides)).out_dir for e in self.captioners]
        rl = [load_stage_config("rl", e.config, tuple(e.overrides)).out_dir for e in self.rl]
        return {"captioners": xe, "rl": rl}.get(stage, xe + rl)

    @staticmethod
    def _stage1(e: Entry):
        return load_stage_config("stage1", e.config, tuple(e.overrides))

    @staticmethod
    def _features(e: Entry):
        return load_stage_config("features", e.config, tuple(e.overrides))


@functools.lru_cache(maxsize=None)
def load_stage_config(kind: str, config: str, overrides: tuple[str, ...]):
    """A stage config through its stage's own loader, once per process: a fingerprint needs every stage's
    commands up to it, so ``preflight`` would otherwise load each config a dozen times (read, never changed)."""
    if kind == "stage1":
        from embedder.config import load_config as load
    elif kind == "features":
        from feature_extract.config import load_features_config as load
    elif kind == "captioners":
        from captioners.config import load_captioner_config as load
    else:
        from rl.config import load_scst_config as load
    return load(config, list(overrides))


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m capaware.pipeline_plan", description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("--run", default=None, help="run folder (overrides run_dir of the pipeline config)")
    parser.add_argument("action", choices=("stages", "commands", "outputs", "fingerprint", "run-dir", "tables", "jobs",
                                           "validate", "preflight", "parallel", "plugins"))
    parser.add_argument("stage", nargs="?", choices=STAGES)
    parser.add_argument("last", nargs="?", choices=STAGES, help="preflight: the last stage of the range")
    parser.add_argument("--force", action="store_true", help="preflight: every stage of the range will run")
    args = parser.parse_args(argv)
    plan = Plan(load_pipeline(args.config, args.run))
    if args.action in ("commands", "outputs", "fingerprint", "jobs", "parallel") and not args.stage:
        parser.error(f"{args.action} needs a STAGE")
    lines = {"stages": lambda: list(STAGES), "run-dir": lambda: [plan.run], "tables": plan.tables,
             "commands": lambda: plan.commands(args.stage), "outputs": lambda: plan.outputs(args.stage),
             "fingerprint": lambda: [plan.fingerprint(args.stage)], "validate": plan.validate,
             "preflight": lambda: plan.preflight(args.stage or STAGES[0], args.last or STAGES[-1], args.force),
             "jobs": lambda: [str(jobs_of(plan.cfg, args.stage) if args.stage in PARALLEL_STAGES else 1)],
             "parallel": lambda: ["yes" if args.stage in DISTRIBUTED_STAGES else "no"],
             "plugins": lambda: [os.pathsep.join(plan.cfg.plugins)] if plan.cfg.plugins else []}[args.action]()
    if lines:
        print("\n".join(lines))


if __name__ == "__main__":
    run_cli(main)
