"""How a torchrun job ends (issue #45): capcore.launch's one line for a dead rank, and capcore.process_exit's
exit without the interpreter's teardown. The 2-process stress runs are scripts/stress_distributed.sh (not in
`make test`: docs/devices.md)."""
from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]

DYING = '''
import os, signal, sys, time
rank = int(os.environ["RANK"])
print(f"rank {rank} starts", flush=True)
if rank == 1:
    print("rank 1: working on step 3", file=sys.stderr, flush=True)
    os.kill(os.getpid(), signal.SIGABRT)
time.sleep(60)  # rank 0 works on; torchrun stops it once rank 1 is dead
'''


def launch(tmp_path: Path, script: str, **env) -> subprocess.CompletedProcess:
    (tmp_path / "job.py").write_text(script)
    return subprocess.run([sys.executable, "-m", "capcore.launch", "--standalone", "--nproc_per_node", "2",
                           str(tmp_path / "job.py")], cwd=ROOT, capture_output=True, text=True, timeout=120,
                          env=dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1",
                                   CAPAWARE_RANK_LOGS=str(tmp_path / "ranks"), **env))


def error_lines(text: str) -> list[str]:
    return [ln for ln in text.splitlines() if ln.startswith("error: ")]


def test_a_rank_killed_by_a_signal_is_named_with_its_signal_last_line_and_log(tmp_path):
    out = launch(tmp_path, DYING)
    assert out.returncode == 1
    line, = error_lines(out.stderr)
    assert line.startswith("error: rank 1 died of SIGABRT (exit code -6); its last line: 'rank 1: working on step 3'")
    log = Path(line.split("its output: ")[1])
    assert log.name == "stderr.log" and log.parent.name == "1" and (tmp_path / "ranks") in log.parents
    assert "rank 1: working on step 3" in log.read_text()
    # both ranks' output is kept in the launcher's own stdout (the stage log), rank by rank
    assert out.stdout.index("rank 0 starts") < out.stdout.index("rank 1 starts")


def test_a_successful_job_replays_every_rank_and_says_nothing_of_errors(tmp_path):
    out = launch(tmp_path, 'import os\nprint("hello from", os.environ["RANK"])\n')
    assert out.returncode == 0, out.stderr
    assert "hello from 0" in out.stdout and "hello from 1" in out.stdout and not error_lines(out.stderr)


EXIT = '''
import atexit, sys
sys.path.insert(0, {root!r})
from capcore import process_exit
from capcore.errors import CapawareError, run_cli

class Finaliser:
    def __del__(self):
        print("finalised", flush=True)  # runs at interpreter teardown, never after os._exit

keep = Finaliser()
atexit.register(lambda: print("atexit ran", flush=True))
if sys.argv[1] == "skip":
    process_exit.skip_teardown()

def main():
    print("partial line without newline", end="")
    if sys.argv[2] == "fail":
        raise CapawareError("data.json", "is broken", "rebuild it")

run_cli(main)
'''


def run_exit(tmp_path: Path, *args: str) -> subprocess.CompletedProcess:
    script = tmp_path / "exit.py"
    script.write_text(textwrap.dedent(EXIT.format(root=str(ROOT))))
    return subprocess.run([sys.executable, str(script), *args], capture_output=True, text=True, timeout=60)


def test_a_rank_ends_without_teardown_after_its_atexit_handlers_and_a_flush(tmp_path):
    ok = run_exit(tmp_path, "skip", "ok")
    assert ok.returncode == 0
    assert ok.stdout.startswith("partial line without newline") and "atexit ran" in ok.stdout
    assert "finalised" not in ok.stdout  # the interpreter's teardown was skipped
    failed = run_exit(tmp_path, "skip", "fail")
    assert failed.returncode == 2 and "atexit ran" in failed.stdout and "finalised" not in failed.stdout
    assert error_lines(failed.stderr) == ["error: data.json: is broken (fix: rebuild it)"]


def test_a_process_that_never_joined_a_group_ends_normally(tmp_path):
    out = run_exit(tmp_path, "normal", "ok")
    assert out.returncode == 0 and "atexit ran" in out.stdout and "finalised" in out.stdout


def test_the_root_cause_is_the_rank_that_failed_of_its_own_accord(tmp_path):
    """A rank killed by a signal is named before one that failed on its closed connection or was stopped by
    torchrun (SIGTERM), whatever their whole-second timestamps say (make test once named rank 0's error file)."""
    from torch.distributed.elastic.multiprocessing.errors import ChildFailedError, ProcessFailure

    from capcore.launch import message_text, root_cause

    stopped = ProcessFailure(local_rank=0, pid=10, exitcode=1, error_file=str(tmp_path / "none.json"))
    stopped.message, stopped.timestamp = {"message": "SignalException: Process 10 got signal: 15"}, 100
    dead = ProcessFailure(local_rank=1, pid=11, exitcode=-9, error_file=str(tmp_path / "none.json"))
    dead.timestamp = 101
    err = ChildFailedError("job", {0: stopped, 1: dead})
    assert root_cause(err) == (1, dead)
    # rank 0 fails on the connection its dead peer closed, stamped a second earlier: the signal still comes first
    peer = ProcessFailure(local_rank=0, pid=12, exitcode=1, error_file=str(tmp_path / "none.json"))
    peer.message, peer.timestamp = {"message": "RuntimeError: Connection closed by peer"}, 100
    assert root_cause(ChildFailedError("job", {0: peer, 1: dead})) == (1, dead)
    assert root_cause(ChildFailedError("job", {0: peer, 1: stopped})) == (0, peer)
    assert message_text(stopped) == "SignalException: Process 10 got signal: 15"
    only_stopped = ChildFailedError("job", {0: stopped})
    assert root_cause(only_stopped) == (0, stopped)


RAISING = '''
import os, sys
sys.path.insert(0, os.environ["PYTHONPATH"])
from capcore.errors import run_cli

def main():
    if os.environ["RANK"] == "1":
        raise RuntimeError("boom in rank 1")
    import time
    time.sleep(60)

run_cli(main)
'''


def test_a_rank_that_raises_has_its_traceback_recorded_in_its_error_file(tmp_path):
    """run_cli wraps main in torch's ``record`` under torchrun: the launcher reads the traceback back from the rank's
    error file and names the rank and its exit code."""
    out = launch(tmp_path, RAISING)
    assert out.returncode == 1
    line = error_lines(out.stderr)[-1]
    assert line.startswith("error: rank 1 exited with code 1; its last line: ")
    error_file = out.stderr.split("rank 1's error file (")[1].split(")")[0]
    assert "boom in rank 1" in Path(error_file).read_text() and "boom in rank 1" in out.stderr
