"""The stage table (capaware/stages.py, issue #66) drives every place that knows the pipeline's stages: a toy stage
put into a copy of the table, between ``features`` and ``captioners``, is listed by ``stages``, gives its commands,
outputs, jobs and tables, enters the fingerprint of every stage after it, is run by ``python -m capaware.stage`` and
named by ``capaware run``'s help, with no other file changed. That the refactor changed nothing for the real stages
is checked by the existing tests and by the derived names below, which are the lists the modules held before the
table, plus the one real stage added as an entry since: ``joint`` (the joint image-text space, joint/train.py),
whose entry gives its commands per feature set, outputs and tables, and which, while a pipeline config lists no
joint configs, leaves every fingerprint as it was before the stage existed (``Stage.added_later``)."""
from __future__ import annotations

import dataclasses

import pytest

from capaware import cli, stage
from capaware.pipeline_plan import DISTRIBUTED_STAGES, PARALLEL_STAGES, STAGES, Plan, main
from capaware.preflight import JAVA_STAGES
from capaware.stages import TABLE, Stage, kinds, names, resolve, stage1_tables
from capcore.errors import CapawareError
from capcore.pipeline_config import PipelineConfig, load_pipeline
from tests.pipeline_helpers import TINY



def toy_run(config: str, args: list[str]) -> None:
    """The toy stage's ``python -m capaware.stage toy`` work: its arguments written into its "config" (a file,
    since capaware.stage imports this module by name, which may be a second copy of the one pytest runs)."""
    with open(config, "a") as f:
        f.write(" ".join(args))


def toy_table(command: str = "python -m toy.toy") -> tuple[Stage, ...]:
    toy = Stage("toy", lambda plan: [f"{command} --run {plan.run}"], lambda plan: [f"{plan.run}/toy"],
                lambda plan: [f"{plan.run}/toy.md"], parallel=True, distributed=True, kind="toy",
                run="tests.capaware.test_stages:toy_run")
    at = names(TABLE).index("features") + 1
    return TABLE[:at] + (toy,) + TABLE[at:]


def test_the_names_derived_from_the_table_are_the_ones_the_modules_held_before_it():
    assert STAGES == ("data", "stage1", "features", "captioners", "joint", "rl", "scores", "report")
    assert PARALLEL_STAGES == ("data", "stage1", "features", "captioners", "joint", "rl")
    assert DISTRIBUTED_STAGES == ("stage1", "captioners", "rl")
    assert stage.KINDS == ("data", "stage1", "features", "xe", "joint", "scst")
    assert stage.LAUNCHED == ("stage1", "xe", "scst")
    assert JAVA_STAGES == ("captioners", "rl")


def test_every_entry_names_a_config_list_a_loader_and_a_runner_that_exist():
    """The schema of a pipeline config lives in capcore (below capaware: it cannot read the table), so a stage's
    ``key`` must be one of PipelineConfig's lists; its loader and its capaware.stage runner must import."""
    lists = {f.name for f in dataclasses.fields(PipelineConfig) if f.type in ("list[str]", list[str])}
    for s in TABLE:
        assert s.key is None or s.key in lists, s.name
        assert (s.key is None) == (s.loader is None), s.name
        assert s.loader is None or callable(resolve(s.loader)), s.name
        assert (s.kind is None) == (s.run is None), s.name
        assert s.run is None or callable(resolve(s.run)), s.name
        assert not s.distributed or s.parallel, s.name  # torchrun runs a parallel stage's commands one at a time
    assert len(set(names())) == len(TABLE) and len(kinds()) == sum(1 for s in TABLE if s.kind)


def test_a_toy_stage_in_a_copy_of_the_table_is_listed_run_and_fingerprinted(tmp_path, capsys):
    table, run = toy_table(), str(tmp_path / "run")
    main([str(TINY), "--run", run, "stages"], table=table)
    assert capsys.readouterr().out.split() == ["data", "stage1", "features", "toy", "captioners", "joint", "rl",
                                               "scores", "report"]
    for action, out in (("commands", f"python -m toy.toy --run {run}"), ("outputs", f"{run}/toy"),
                        ("parallel", "yes"), ("jobs", "1")):
        main([str(TINY), "--run", run, action, "toy"], table=table)
        assert capsys.readouterr().out == out + "\n", action
    main([str(TINY), "--run", run, "stages"])  # the real table is untouched
    assert "toy" not in capsys.readouterr().out

    cfg = load_pipeline(str(TINY), run)
    plan, real = Plan(cfg, table), Plan(cfg)
    tables = plan.tables()  # stage one's, the toy's, then the scores stage's: in the table's order
    assert tables.index(f"{run}/toy.md") == len(stage1_tables(real)) == 1
    assert [t for t in tables if t != f"{run}/toy.md"] == real.tables()
    assert plan.validate() == real.validate()  # a stage without configs of its own adds none to validate
    with pytest.raises(CapawareError, match="unknown stage 'toy'"):
        real.commands("toy")

    # the stage's commands are part of the fingerprint of every stage after it, and of none before it
    other = Plan(cfg, toy_table("python -m toy.toy --epochs 2"))
    for name in ("data", "stage1", "features"):
        assert plan.fingerprint(name) == real.fingerprint(name) == other.fingerprint(name)
    for name in ("toy", "captioners", "joint", "rl", "scores", "report"):
        assert plan.fingerprint(name) != other.fingerprint(name)
        assert name == "toy" or plan.fingerprint(name) != real.fingerprint(name)
    assert plan.pending("features", "captioners") == ["features", "toy", "captioners"]


def test_the_toy_stages_kind_is_dispatched_by_capaware_stage_and_named_by_capaware_run(monkeypatch, tmp_path):
    monkeypatch.delenv("CAPAWARE_LAUNCH", raising=False)
    monkeypatch.setattr(stage, "TABLE", toy_table())
    stage.main(["toy", str(tmp_path / "ran"), "a=1", "b=2"])
    assert (tmp_path / "ran").read_text() == "a=1 b=2"
    assert "features toy captioners" in cli.run_summary(toy_table())
    assert cli.COMMANDS["run"].summary == cli.run_summary() and "toy" not in cli.run_summary()


def test_the_joint_entry_gives_its_commands_outputs_and_tables_per_feature_set(tmp_path):
    """The real joint stage is one entry: with joint configs it runs ``capaware.stage joint`` once per feature set
    (like XE and SCST), owns its run folders and results, prints its tables and enters the fingerprints after it;
    with none (every pipeline config before it) it leaves every stage's fingerprint as it was."""
    from tests.pipeline_helpers import tiny_config

    run = str(tmp_path / "run")
    bare = Plan(load_pipeline(str(TINY), run))
    path = tiny_config(tmp_path, joint=["configs/demo/demo_joint.yaml train.epochs=1"])
    plan = Plan(load_pipeline(str(path), run))
    sets = plan.feature_sets
    assert sets and plan.commands("joint") == [f"python -m capaware.stage joint configs/demo/demo_joint.yaml "
                                               f"run_dir={run} data.features={f} train.epochs=1" for f in sets]
    assert bare.commands("joint") == [] and bare.tables() == [t for t in plan.tables() if "/joint/" not in t]
    assert plan.outputs("joint") == [p for f in sets for p in (f"{run}/joint/{f}", f"{run}/results/joint/{f}.json",
                                                                 f"{run}/results/joint/{f}.md")]
    assert [t for t in plan.tables() if "/joint/" in t] == [f"{run}/results/joint/{f}.md" for f in sets]
    assert plan.jobs("joint") == plan.jobs("captioners") and plan.stage("joint").estimate == "joint"
    for name in ("data", "stage1", "features", "captioners"):
        assert plan.fingerprint(name) == bare.fingerprint(name)
    for name in ("rl", "scores", "report"):
        assert plan.fingerprint(name) != bare.fingerprint(name)
    assert bare.fingerprint("joint") == bare.fingerprint("captioners")  # unused: nothing of its own
    no_joint = Plan(load_pipeline(str(TINY), run), tuple(s for s in TABLE if s.name != "joint"))
    for name in ("data", "stage1", "features", "captioners", "rl", "scores", "report"):
        assert bare.fingerprint(name) == no_joint.fingerprint(name)


def test_an_entry_that_names_its_feature_set_runs_on_that_set_alone(tmp_path):
    """A captioners' stage entry runs once per feature set, unless it names one itself (``data.features=img``:
    the demo's self-retrieval run): then once, on that set, its override as written."""
    from tests.pipeline_helpers import tiny_config

    run = str(tmp_path / "run")
    path = tiny_config(tmp_path, joint=["configs/demo/demo_joint.yaml train.epochs=1",
                                        "configs/demo/demo_joint.yaml train.epochs=2 data.features=cap"])
    plan = Plan(load_pipeline(str(path), run))
    sets = plan.feature_sets
    assert len(sets) >= 2 and "cap" in sets
    assert plan.commands("joint") == [f"python -m capaware.stage joint configs/demo/demo_joint.yaml run_dir={run} "
                                      f"data.features={f} train.epochs=1" for f in sets] + [
        f"python -m capaware.stage joint configs/demo/demo_joint.yaml run_dir={run} train.epochs=2 data.features=cap"]
