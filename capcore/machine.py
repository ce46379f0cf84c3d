"""What this machine lends a job: its cores, the memory it can still give, and the filesystem a path is on.

Read from Linux's own accounts (``sched_getaffinity``, ``/proc/meminfo``, ``/proc/mounts``) rather than
psutil, which is not among capaware's packages and would add nothing these three files do not say.
"""
from __future__ import annotations

import os
from pathlib import Path

NETWORK_FILESYSTEMS = ("nfs", "nfs4", "cifs", "smb3", "smbfs", "fuse.sshfs", "lustre", "gpfs", "beegfs",
                       "fuse.s3fs", "fuse.gcsfuse", "9p")
"""Filesystem types whose random reads go over a network (an HDF5 read per image pays its latency)."""


def cores() -> int:
    """Cores this process may run on, or its share of them where a launcher set OMP_NUM_THREADS."""
    mine = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    share = os.environ.get("OMP_NUM_THREADS", "")
    return max(1, min(mine, int(share))) if share.isdigit() and int(share) > 0 else mine


def local_processes() -> int:
    """Processes of one distributed job on this machine (torchrun's LOCAL_WORLD_SIZE; 1 outside torchrun):
    they share its memory and cores."""
    return max(1, int(os.environ.get("LOCAL_WORLD_SIZE", "1") or 1))


def available_memory(meminfo: str | Path = "/proc/meminfo") -> int | None:
    """Bytes the kernel can give new work without swapping (MemAvailable); None where it does not say."""
    try:
        for line in Path(meminfo).read_text().splitlines():
            if line.startswith("MemAvailable:"):
                return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        return None
    return None


def filesystem_type(path: str | Path, mounts: str | Path = "/proc/mounts") -> str | None:
    """Type of the filesystem holding ``path`` (the longest mount point above it); None if unknown."""
    target = Path(path).resolve()
    while not target.exists() and target != target.parent:
        target = target.parent
    best, kind = "", None
    try:
        lines = Path(mounts).read_text().splitlines()
    except OSError:
        return None
    for line in lines:
        parts = line.split()
        if len(parts) < 3:
            continue
        point = parts[1].replace("\\040", " ")
        if (str(target) == point or str(target).startswith(point.rstrip("/") + "/")) and len(point) >= len(best):
            best, kind = point, parts[2]
    return kind


def on_network_filesystem(path: str | Path, mounts: str | Path = "/proc/mounts") -> str | None:
    """The network filesystem type under ``path``, or None when it is local (or unknown)."""
    kind = filesystem_type(path, mounts)
    return kind if kind in NETWORK_FILESYSTEMS else None
