"""scripts/pipeline.sh on tests/fixtures/pipeline_tiny.yaml: stage skipping, one-line failures, and a
SIGKILL during stage three followed by a rerun giving the tables of an uninterrupted run (two jobs at a time
and the seed tables: tests/capaware/test_pipeline_jobs.py)."""
from __future__ import annotations

import json
import shutil
import socket
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from capaware.stages import names
from capcore.run_layout import (
    CaptionerDir,
    CaptionerManifest,
    RunDir,
    StudyManifest,
    read_manifest,
)
from tests.pipeline_helpers import ROOT, TINY, build_upstream, copies, pipeline, table_rows, tiny_config


def test_a_failed_stage_stops_with_one_line_naming_its_log(tmp_path):
    missing = tmp_path / "empty_dataset"  # there (a missing folder is refused before any stage: test_preflight.py)
    missing.mkdir()  # but without its annotation file: the data stage fails on it
    tiny = yaml.safe_load(TINY.read_text())  # the tiny overrides kept: the failure, not a 6,700-image set, is tested
    bad = tiny_config(tmp_path, stage1=[f"{tiny['stage1'][0]} data.synthetic=null data.root={missing}"])
    out = pipeline(bad, tmp_path / "run")
    assert out.returncode == 1
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1, out.stderr
    assert lines[0].startswith("error: stage data failed") and str(missing) in lines[0]
    assert lines[0].endswith(f"(full log: {tmp_path / 'run' / 'logs' / 'data.log'})")
    assert not (tmp_path / "run" / ".pipeline" / "data.done").exists()


def test_a_bad_stage_config_is_refused_before_anything_runs(tmp_path):
    bad = tiny_config(tmp_path, stage1=["configs/demo/demo_caption.yaml train.epochs=oops"])
    out = pipeline(bad, tmp_path / "run")
    assert out.returncode != 0 and len(out.stderr.strip().splitlines()) == 1
    assert "train.epochs" in out.stderr and not (tmp_path / "run" / "logs" / "data.log").exists()


def test_an_unknown_stage_name_is_one_line_and_nothing_runs(tmp_path):
    out = pipeline(tiny_config(tmp_path), tmp_path / "run", "--from", "feature")
    assert out.returncode == 2 and out.stderr.strip().splitlines() == [
        f"error: unknown stage 'feature'; stages: {' '.join(names())}"], out.stderr  # the stage table's, in order
    assert not (tmp_path / "run").exists()


@pytest.fixture(scope="module")
def upstream(tmp_path_factory) -> tuple[Path, Path]:
    return build_upstream(tmp_path_factory.mktemp("pipeline"))


@pytest.fixture(scope="module")
def whole(upstream, tmp_path_factory) -> Path:
    """The uninterrupted one-process run of stage three from the upstream copy: the reference of the kill
    and the two-process tests."""
    config, base = upstream
    run, = copies(base, tmp_path_factory.mktemp("whole") / "run")
    out = pipeline(config, run, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    for stage in ("data", "stage1", "features"):  # a copied run keeps its finished stages
        assert f"[{stage}] complete, skipped" in out.stdout
    return run


@pytest.mark.integration  # 106 s with the uninterrupted run on a 2-vCPU Intel Xeon; make test: XE and SCST resume
@pytest.mark.timeout(900)  # (test_captioners_train.py, test_rl_scst.py), a failed stage's marker, --from/--to/--force
def test_a_kill_in_stage_three_then_rerun_gives_the_uninterrupted_tables(upstream, whole, tmp_path):
    """Deterministic: the first XE run dies abruptly after step 6 (``train.stop_after_steps``: no clean-up,
    no checkpoint), its last checkpoint is step 4, so the rerun replays steps 5 and 6."""
    config, base = upstream
    killed, = copies(base, tmp_path / "killed")

    tiny = yaml.safe_load(TINY.read_text())
    dying = tiny_config(tmp_path, feature_sets=["cap"],
                        captioners=[tiny["captioners"][0] + " train.stop_after_steps=6"])
    out = pipeline(dying, killed, timeout=600)
    assert out.returncode != 0 and out.stderr.startswith("error: stage captioners failed"), out.stderr
    state = __import__("torch").load(killed / "captioners" / "cap_att2all2" / "last.pt", weights_only=True)
    assert state["step"] == 4 and not state["done"]  # older than the kill: steps 5 and 6 are lost
    assert not (killed / ".pipeline" / "captioners.done").exists()

    out = pipeline(config, killed, timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[captioners] running" in out.stdout
    assert table_rows(killed) == table_rows(whole)
    assert [r["training"] for r in table_rows(whole)] == ["XE", "RL"]
    # every study and captioner run left the manifest the report reads (capcore/run_layout.py)
    studies = [read_manifest(RunDir(whole).study_manifest(table.parent.name), StudyManifest)
               for table in RunDir(whole).results_root.glob("*/retrieval.json")]
    assert studies and all(m is not None and (whole / m.study_dir / "retrieval").is_dir() for m in studies)
    runs = [read_manifest(CaptionerDir(Path(r["preds"]).parent).manifest, CaptionerManifest)
            for r in json.loads(RunDir(whole).captioning_json.read_text())["rows"]]
    assert [m.stage for m in runs] == ["xe", "rl"] and all((whole / m.features).is_file() for m in runs)

    again = pipeline(config, killed, timeout=120)  # everything complete: nothing runs
    assert again.returncode == 0 and "running" not in again.stdout
    assert again.stdout.count("complete, skipped") == len(names())
    assert "### Captioning" in again.stdout  # the final tables are printed


def assert_trains_as_one(whole: Path, run: Path) -> None:
    """XE and SCST of ``run`` as the one-process run ``whole``: every logged loss within the relative 1e-5
    docs/devices.md states for stage three, the same test captions, the same Table 1."""
    from tests.tensorboard_log import tb_values

    for name, tag in (("cap_att2all2", "train/loss"), ("cap_att2all2_scst", "scst/loss")):
        one_log, two_log = (tb_values(r / "captioners" / name / "tb", tag) for r in (whole, run))
        assert sorted(one_log) == sorted(two_log) and one_log, name
        assert max(abs(one_log[s] - two_log[s]) / abs(one_log[s]) for s in one_log) <= 1e-5, name
    for name in ("cap_att2all2", "cap_att2all2_scst"):
        preds = [json.loads((r / "captioners" / name / "preds_test.json").read_text()) for r in (whole, run)]
        assert preds[0] == preds[1], name
    assert table_rows(run) == table_rows(whole)


@pytest.mark.integration  # 46 s on a 2-vCPU Intel Xeon; make test: XE and SCST on two processes match one
@pytest.mark.timeout(900)  # (capcore/test_distributed.py) and the pipeline's --nproc 2 (the killed rank, below)
def test_two_processes_train_as_one_and_keep_the_skip_markers(upstream, whole, tmp_path):
    """``--nproc 2`` runs XE and SCST under torchrun (gloo on CPU): every logged step's loss within the
    relative 1e-5 docs/devices.md states for stage three, the same test captions and Table 1; rank 1 decodes
    and scores nothing. Its markers are the one-process run's: a rerun with one process skips every stage."""
    config, base = upstream
    two, = copies(base, tmp_path / "two")
    out = pipeline(config, two, "--nproc", "2", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    for stage in ("captioners", "rl"):
        assert "2 processes (torchrun)" in (two / "logs" / f"{stage}.log").read_text(), stage
    assert_trains_as_one(whole, two)
    again = pipeline(config, two, timeout=120)
    assert again.returncode == 0 and again.stdout.count("complete, skipped") == len(names())


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.mark.integration  # 44 s on a 2-vCPU Intel Xeon; make test: two processes (capcore/test_distributed.py)
@pytest.mark.timeout(900)
def test_two_nodes_on_one_machine_train_as_one(upstream, whole, tmp_path):
    """``capaware run --nnodes 2`` started twice, node ranks 0 and 1, rendezvous on 127.0.0.1 (gloo on CPU),
    one process per node and one shared run folder: XE and SCST train as the one-node run does (every logged
    loss within 1e-5, the same test captions and Table 1). Node 1 runs no stage of its own and leaves every
    marker to node 0."""
    from tests.pipeline_helpers import env

    config, base = upstream
    run, = copies(base, tmp_path / "nodes")
    common = [sys.executable, "-m", "capaware", "run", str(config), "--run", str(run), "--nproc", "1",
              "--nnodes", "2", "--rdzv-endpoint", f"127.0.0.1:{free_port()}"]
    nodes = [subprocess.Popen(common + ["--node-rank", str(r)], cwd=ROOT, env=env(), stdout=subprocess.PIPE,
                              stderr=subprocess.STDOUT, text=True) for r in (0, 1)]
    outs = [node.communicate(timeout=800)[0] for node in nodes]
    assert [node.returncode for node in nodes] == [0, 0], outs
    for stage in ("data", "features", "scores", "report"):  # node 0's alone (node 1 waits, or finds them done)
        assert f"[{stage}] running" not in outs[1] and f"[{stage}] waiting" not in outs[0], stage
    for stage in ("captioners", "rl"):
        assert "2 processes (torchrun)" in (run / "logs" / f"{stage}.log").read_text(), stage
    assert_trains_as_one(whole, run)
    assert not list((run / "logs").glob("*.part*"))


# Loaded by every Python process of the test's pipeline (sitecustomize on PYTHONPATH); only torchrun's rank 1
# acts: once it has joined the process group it says so and is killed, mid-run, as an out-of-memory kill would.
KILL_RANK_1 = """
import importlib.machinery, os, signal, sys
class KillAfterJoin:
    def find_spec(self, name, path, target=None):
        if name != "capcore.distributed":
            return None
        sys.meta_path.remove(self)
        spec = importlib.machinery.PathFinder.find_spec(name, path)
        run_module = spec.loader.exec_module
        def exec_module(module):
            run_module(module)
            join = module.init
            def init(device):
                world = join(device)
                print("rank 1 joined the group", file=sys.stderr, flush=True)
                os.kill(os.getpid(), signal.SIGKILL)
                return world
            module.init = init
        spec.loader.exec_module = exec_module
        return spec
if os.environ.get("RANK") == "1":
    sys.meta_path.insert(0, KillAfterJoin())
"""


@pytest.mark.timeout(600)
def test_a_rank_killed_mid_run_gives_one_line_naming_the_stage_rank_signal_and_logs(upstream, tmp_path):
    import subprocess

    from tests.pipeline_helpers import ROOT, env

    config, base = upstream
    run, = copies(base, tmp_path / "run")
    hook = tmp_path / "hook"
    hook.mkdir()
    (hook / "sitecustomize.py").write_text(KILL_RANK_1)
    environ = env()
    environ["PYTHONPATH"] = f"{hook}:{environ['PYTHONPATH']}"
    out = subprocess.run(["bash", "scripts/pipeline.sh", str(config), "--run", str(run), "--nproc", "2"], cwd=ROOT,
                         env=environ, capture_output=True, text=True, timeout=600)
    assert out.returncode == 1
    line, = out.stderr.strip().splitlines()
    assert line.startswith("error: stage captioners failed: rank 1 died of SIGKILL (exit code -9); "
                           "its last line: 'rank 1 joined the group'; its output: "), line
    rank_log = Path(line.split("its output: ")[1].split("  (full log: ")[0])
    assert run / "logs" / "ranks" / "captioners" in rank_log.parents and rank_log.parent.name == "1"
    assert line.endswith(f"(full log: {run / 'logs' / 'captioners.log'})")
    assert not (run / ".pipeline" / "captioners.done").exists()


@pytest.mark.timeout(600)
def test_from_to_force_reruns_only_that_range(upstream, tmp_path):
    config, base = upstream
    run = tmp_path / "run"
    shutil.copytree(base, run)
    before = (run / "features" / "cap.h5").stat().st_mtime_ns
    stage1 = (run / "caption" / "methods").stat().st_mtime_ns
    out = pipeline(config, run, "--from", "features", "--to", "features", "--force", timeout=300)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[features] running" in out.stdout and "[stage1]" not in out.stdout and "[captioners]" not in out.stdout
    assert (run / "features" / "cap.h5").stat().st_mtime_ns != before
    assert (run / "caption" / "methods").stat().st_mtime_ns == stage1
    again = pipeline(config, run, "--to", "features", timeout=300)  # every stage's marker matches: nothing runs
    assert again.returncode == 0 and "running" not in again.stdout, again.stdout + again.stderr
    assert [ln for ln in again.stdout.splitlines() if ln.endswith("complete, skipped")] == [
        f"[{stage}] complete, skipped" for stage in ("data", "stage1", "features")]


def test_a_stage_with_no_commands_finishes(tmp_path):
    """``report: false`` leaves the report stage no command: it still ends with its done line and exit 0 (the
    progress watcher, which follows the commands' log parts, starts only when there are parts to follow)."""
    config = tiny_config(tmp_path, report=False)
    out = pipeline(config, tmp_path / "run", "--from", "report", "--to", "report", timeout=120)
    assert out.returncode == 0, out.stdout + out.stderr
    assert "[report] running 0 command(s)" in out.stdout and "[report] done in " in out.stdout
