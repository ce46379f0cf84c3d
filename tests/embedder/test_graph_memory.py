"""How many caption-graph workers a machine can hold (embedder.labels.graph_memory), from what Linux says
it has (capcore.machine): the count kept when the user sets it, capped by cores and memory when not."""
from __future__ import annotations

import json

import numpy as np

from capcore import machine
from embedder.labels import graph_memory as gm
from tests.pipeline_helpers import ROOT


def test_the_per_worker_line_is_the_benchmarks_measured_fit():
    fit = json.loads((ROOT / "benchmarks/results/caption_graph_memory.json").read_text())
    points = fit["measured"] + fit["cited"]
    assert len(fit["measured"]) >= 3 and all(r["source"] for r in fit["cited"])  # every cited point says whose
    n = np.array([r["n"] for r in points], float)
    peak = np.array([r["worker_peak_bytes"] for r in points], float)
    slope, base = np.polyfit(n, peak, 1)  # recomputed from the points, not copied from the file's fit
    assert abs(gm.WORKER_BYTES_PER_IMAGE - slope) <= 0.001 * slope
    assert abs(gm.WORKER_BASE_BYTES - base) <= 0.001 * base
    assert all(abs(gm.worker_bytes(r["n"]) - r["worker_peak_bytes"]) <= 0.05 * r["worker_peak_bytes"] for r in points)


def test_a_set_count_is_kept_and_a_null_one_is_capped_by_cores_and_memory():
    one = gm.worker_bytes(10_000)
    assert gm.graph_workers(16, 10_000, cores=2, memory=one)[0] == 16  # the user's number (the preflight judges it)
    assert gm.graph_workers(None, 10_000, cores=2, memory=100 * one)[0] == 2  # cores bind
    workers, why = gm.graph_workers(None, 10_000, cores=64, memory=5 * one)
    assert workers == int(0.85 * 5) and f"{one / 1e9:.2f} GB a worker for 10,000 images" in why  # memory binds
    assert gm.graph_workers(None, 10_000, cores=64, memory=10 * one, processes=2)[0] == int(0.85 * 5)
    assert gm.graph_workers(None, 10_000, cores=8, memory=None)[0] == 8  # no memory figure: the cores
    assert gm.graph_workers(None, 10_000, cores=64, memory=one // 10)[0] == 1  # never none at all
    assert gm.worker_bytes(20_000) > gm.worker_bytes(10_000)


def test_available_memory_and_the_filesystem_under_a_path_come_from_procs_files(tmp_path):
    (tmp_path / "meminfo").write_text("MemTotal:       24000000 kB\nMemFree:  100 kB\nMemAvailable:   20000000 kB\n")
    assert machine.available_memory(tmp_path / "meminfo") == 20_000_000 * 1024
    (tmp_path / "bad").write_text("MemTotal: 1 kB\n")
    assert machine.available_memory(tmp_path / "bad") is None
    assert machine.available_memory(tmp_path / "absent") is None
    mounts = tmp_path / "mounts"
    (tmp_path / "shared" / "scratch").mkdir(parents=True)  # mount points exist
    mounts.write_text(f"/dev/sda1 / ext4 rw 0 0\nserver:/export {tmp_path}/shared nfs4 rw 0 0\n"
                      f"tmpfs {tmp_path}/shared/scratch tmpfs rw 0 0\n")
    assert machine.filesystem_type(tmp_path / "shared/features/x.h5", mounts) == "nfs4"  # not written yet
    assert machine.on_network_filesystem(tmp_path / "shared/f.h5", mounts) == "nfs4"
    assert machine.filesystem_type(tmp_path / "shared/scratch/f.h5", mounts) == "tmpfs"  # the longest mount wins
    assert machine.on_network_filesystem(tmp_path / "sharedx/f.h5", mounts) is None  # a prefix, not a parent
    assert machine.on_network_filesystem(tmp_path / "local.h5", mounts) is None


def test_cores_are_this_processes_share(monkeypatch):
    monkeypatch.delenv("OMP_NUM_THREADS", raising=False)
    mine = machine.cores()
    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert machine.cores() == 1
    monkeypatch.setenv("OMP_NUM_THREADS", str(mine + 8))  # a share larger than the machine: the machine
    assert machine.cores() == mine


def test_images_go_into_ram_when_they_fit_the_memory_to_spare(monkeypatch):
    from embedder.data import fits_in_memory

    one = 3 * 224 * 224
    monkeypatch.setattr(machine, "available_memory", lambda: 1000 * one)
    monkeypatch.delenv("LOCAL_WORLD_SIZE", raising=False)
    assert fits_in_memory(500, 224)[0] and not fits_in_memory(501, 224)[0]  # half the available memory
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two ranks, two copies
    assert fits_in_memory(250, 224)[0] and not fits_in_memory(251, 224)[0]
    monkeypatch.setattr(machine, "available_memory", lambda: None)
    assert not fits_in_memory(1, 224)[0]
