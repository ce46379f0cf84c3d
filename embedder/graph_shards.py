"""The neighbour graph ``labels.h5`` built in shards (image ranges) on several machines, then merged.

    python -m embedder.graph_shards space --config CFG [key=value ...]               # optional, once
    python -m embedder.graph_shards build --config CFG --shard I/N [key=value ...]   # on machine I
    python -m embedder.graph_shards merge --config CFG [key=value ...]               # once, anywhere

Why: the exact COCO caption graph is hours of CPU; its rows are independent (each query is searched
over all N items), so N machines can each compute a contiguous range of rows with the same code that
``embedder.rows`` uses (``embedder.spaces.build_graph`` with ``rows``). Each shard is one HDF5 file
``<out_dir>/labels.shards/shard_I_of_N.h5`` (written atomically; a rerun skips a finished one; a
caption shard also resumes its chunks in ``<out_dir>/labels.chunks`` like a study does). ``merge``
checks every shard against this config's label space and writes ``<out_dir>/labels.h5`` with the
attrs ``embedder.track.load_or_build_graph`` expects, so the study reuses it instead of building.
``space`` only builds the label space (training and caching Word2Vec vectors in ``out_dir``), so
one machine can make the vectors and the others copy them (see notes/graph_shards.md).
"""
from __future__ import annotations

import argparse
import json
import re
import shlex
import sys
import time
from pathlib import Path

import numpy as np

from capcore.errors import CapawareError, run_cli
from capcore.run_layout import StudyDir
from embedder.config import load_config
from capdata.formats import read_records
from embedder.labels.graph import read_graph, write_graph
from embedder.spaces import build_graph, make_spaces
from embedder.track import split_indices

SHARD_DIR = "labels.shards"
SHARD_KEYS = ("shard", "n_shards", "row_lo", "row_hi", "labels_probe")  # per-shard attrs, dropped on merge
_NAME = re.compile(r"shard_(\d+)_of_(\d+)\.h5")


def shard_range(i: int, n_shards: int, n: int) -> tuple[int, int]:
    """Rows [lo, hi) of shard ``i`` of ``n_shards``: contiguous, sizes differ by at most one."""
    return i * n // n_shards, (i + 1) * n // n_shards


def parse_shard(text: str) -> tuple[int, int]:
    match = re.fullmatch(r"(\d+)/(\d+)", text.strip())
    if not match or not int(match[1]) < int(match[2]):
        raise CapawareError("--shard", f"{text!r} is not I/N with 0 <= I < N", "e.g. --shard 0/4 ... --shard 3/4")
    return int(match[1]), int(match[2])


def shard_path(out_dir: str | Path, i: int, n_shards: int) -> Path:
    return Path(out_dir) / SHARD_DIR / f"shard_{i}_of_{n_shards}.h5"


def train_space(cfg):
    """The training label space exactly as ``embedder.track.prepare_track`` builds it."""
    records = read_records(cfg.data)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    return make_spaces(cfg, records, *split_indices(cfg, records), out)[0]


def graph_identity(space, m: int) -> dict:
    """The attrs ``embedder.track.load_or_build_graph`` compares before it reuses ``labels.h5``."""
    return {"label_space": space.name, "m": m, "params": json.dumps(space.params(), sort_keys=True),
            "n_items": len(space)}


def labels_probe(space) -> np.ndarray:
    """A few label distances spread over the set: catches shards built from other data with equal params
    (pose and layout params name no data hash). Compared with a tolerance, not hashed, so machines whose
    float rounding differs in the last bit still agree."""
    n = len(space)
    rows = np.unique(np.linspace(0, n - 1, min(n, 4)).astype(np.int64))
    cols = np.unique(np.linspace(0, n - 1, min(n, 16)).astype(np.int64))
    return np.asarray(space.pairwise(rows, cols), np.float64)


def _mismatch(attrs: dict, expected: dict, probe: np.ndarray) -> str | None:
    """Why a shard file is not part of this build (first difference found), or None."""
    for key, value in expected.items():
        got = attrs.get(key)
        if got == value:
            continue
        if key == "params" and isinstance(got, str):  # name the differing parameters, not two JSON blobs
            try:
                got, value = json.loads(got), json.loads(value)
            except ValueError:
                pass
            else:
                keys = sorted(k for k in {*got, *value} if got.get(k) != value.get(k))
                return "params differ: " + ", ".join(f"{k} is {got.get(k)!r}, this config has {value.get(k)!r}"
                                                     for k in keys)
        return f"{key} is {got!r}, this config has {value!r}"
    got = np.asarray(json.loads(attrs.get("labels_probe", "[]")), np.float64)
    if got.shape != probe.shape or not np.allclose(got, probe, rtol=1e-5, atol=1e-6):
        return "its labels differ from this config's data (label-distance probe)"
    return None


def build_shard(cfg, i: int, n_shards: int, progress: bool = True, space=None) -> Path:
    """Compute rows ``shard_range(i, n_shards, N)`` of the graph into the shard file; skip it if done."""
    space = space if space is not None else train_space(cfg)
    n, m = len(space), cfg.graph.m
    lo, hi = shard_range(i, n_shards, n)
    if hi <= lo:
        raise CapawareError("--shard", f"shard {i}/{n_shards} has no rows: only {n} training items",
                            f"use at most {n} shards")
    path = shard_path(cfg.out_dir, i, n_shards)
    expected = {**graph_identity(space, m), "shard": i, "n_shards": n_shards, "row_lo": lo, "row_hi": hi}
    probe = labels_probe(space)
    if path.is_file():
        try:
            why = _mismatch(read_graph(path).attrs, expected, probe)
        except CapawareError as err:  # half-written or unreadable: build it again
            why = err.problem
        if why is None:
            if progress:
                print(f"shard {i}/{n_shards}: {path} is already complete (rows [{lo}, {hi}) of {n})")
            return path
        if progress:
            print(f"shard {i}/{n_shards}: rebuilding {path} ({why})", file=sys.stderr)
    t0 = time.perf_counter()
    graph = build_graph(space, cfg, m, Path(cfg.out_dir) / "labels.chunks", rows=(lo, hi), progress=progress)
    write_graph(path, graph.nn_idx, graph.nn_dist,
                {**graph.attrs, **expected, "labels_probe": json.dumps(probe.tolist())})
    if progress:
        print(f"shard {i}/{n_shards}: rows [{lo}, {hi}) of {n}, m={m} -> {path} "
              f"({time.perf_counter() - t0:.1f} s)")
    return path


def _shard_counts(folder: Path) -> set[int]:
    return {int(mt[2]) for p in folder.glob("shard_*_of_*.h5") if (mt := _NAME.fullmatch(p.name))}


def merge_shards(cfg, n_shards: int | None = None, config_name: str = "CFG", overrides: tuple[str, ...] = (),
                 progress: bool = True, space=None) -> Path:
    """Check all shards against this config and tile 0..N; write ``<out_dir>/labels.h5``."""
    folder = Path(cfg.out_dir) / SHARD_DIR

    def build_cmd(spec: str) -> str:
        return " ".join(["python -m embedder.graph_shards build --config", shlex.quote(config_name),
                         "--shard", spec, *map(shlex.quote, overrides)])
    if n_shards is None:
        counts = _shard_counts(folder)
        if not counts:
            raise CapawareError(folder, "no shard files (shard_I_of_N.h5) to merge",
                                f"run `{build_cmd('I/N')}` for I = 0..N-1 first")
        if len(counts) > 1:
            raise CapawareError(folder, f"shards of several splittings are present (N = {sorted(counts)})",
                                "pass --shards N, or delete the shard files of the other splittings")
        n_shards = counts.pop()
    missing = [i for i in range(n_shards) if not shard_path(cfg.out_dir, i, n_shards).is_file()]
    if missing:
        names = ", ".join(shard_path(cfg.out_dir, i, n_shards).name for i in missing)
        raise CapawareError(folder, f"{len(missing)} of {n_shards} shards missing: {names}",
                            f"run `{build_cmd(f'{missing[0]}/{n_shards}')}` (and the other missing ones), "
                            "or copy their files here")
    space = space if space is not None else train_space(cfg)  # after the cheap checks: it may take minutes
    n, m = len(space), cfg.graph.m
    identity, probe = graph_identity(space, m), labels_probe(space)
    idx, dist, attrs = [], [], None
    solves = 0
    for i in range(n_shards):
        path = shard_path(cfg.out_dir, i, n_shards)
        shard = read_graph(path)
        lo, hi = shard_range(i, n_shards, n)
        why = _mismatch(shard.attrs, {**identity, "shard": i, "n_shards": n_shards, "row_lo": lo, "row_hi": hi},
                        probe)
        if why is None and (shard.nn_idx.shape != (hi - lo, m) or shard.nn_idx.min() < 0
                            or shard.nn_idx.max() >= n):
            why = f"its arrays are {shard.nn_idx.shape}, not rows [{lo}, {hi}) x m={m} of {n} items"
        if why is not None:
            raise CapawareError(path, f"shard built for another config or split: {why}",
                                f"rebuild it with `{build_cmd(f'{i}/{n_shards}')}` (it replaces the file)")
        idx.append(shard.nn_idx)
        dist.append(shard.nn_dist)
        solves += int(shard.attrs.get("emd_solves", 0))
        if attrs is None:
            attrs = {k: v for k, v in shard.attrs.items() if k not in SHARD_KEYS and k != "complete"}
    if "emd_solves" in attrs:
        attrs["emd_solves"] = solves
    out = StudyDir(cfg.out_dir).labels
    write_graph(out, np.concatenate(idx), np.concatenate(dist), {**attrs, **identity, "merged_shards": n_shards})
    if progress:
        print(f"merged {n_shards} shards -> {out}: {n} items x {m} neighbours ({space.name}); "
              f"embedder.rows will reuse it")
    return out


def describe_space(cfg) -> str:
    """Build the label space once (caches word vectors under out_dir); say what identifies it."""
    space = train_space(cfg)
    params = space.params()
    digest = {k: v for k, v in params.items() if k.endswith("sha256")}
    return (f"{space.name}: {len(space)} training items, m={cfg.graph.m}; {digest or params}\n"
            f"cached under {cfg.out_dir}: copy word_vectors.kv* (if any) to the same path on every shard machine")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    sub = parser.add_subparsers(dest="command", required=True)
    r = sub.add_parser("space", help="build the label space only (trains and caches word vectors)")
    r.add_argument("--config", required=True)
    b = sub.add_parser("build", help="compute one shard (rows I*n/N .. (I+1)*n/N) of the graph")
    b.add_argument("--config", required=True)
    b.add_argument("--shard", required=True, help="I/N: shard I (0-based) of N")
    g = sub.add_parser("merge", help="check all shards and write <out_dir>/labels.h5")
    g.add_argument("--config", required=True)
    g.add_argument("--shards", type=int, default=None, help="N, when shard files of several N are present")
    for p in (r, b, g):
        p.add_argument("overrides", nargs="*", help="key=value config overrides (the same on every machine)")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    if args.command == "space":
        print(describe_space(cfg))
    elif args.command == "build":
        build_shard(cfg, *parse_shard(args.shard))
    else:
        merge_shards(cfg, args.shards, config_name=args.config, overrides=tuple(args.overrides))


if __name__ == "__main__":
    run_cli(main)


def graph_is_current(cfg, space) -> bool:
    """``labels.h5`` holds this label space's graph (what ``embedder.track.load_or_build_graph`` reuses)."""
    path = StudyDir(cfg.out_dir).labels
    if not path.is_file():
        return False
    try:
        attrs = read_graph(path).attrs
    except CapawareError:
        return False
    return all(attrs.get(k) == v for k, v in graph_identity(space, cfg.graph.m).items())


def build_across_ranks(cfg, progress: bool = True) -> None:
    """Under torchrun, the training graph's queries split across the ranks: each builds its shard (rows
    ``shard_range(rank, world, N)``, with its own ``graph.workers``), rank 0 merges them into ``labels.h5``, which
    ``embedder.track.prepare_track`` then reuses. Equal to rank 0's graph alone, since each query's neighbours do
    not depend on how the queries are grouped (tests/capcore/test_distributed.py). Outside torchrun, or with a graph
    already built, nothing happens: ``prepare_track`` builds or finds it as before."""
    from capcore import distributed

    world, rank = distributed.world_size(), distributed.rank()
    if world == 1:
        return
    with distributed.rank_zero_first():  # rank 0 first: it may generate the data and cache the word vectors
        space = train_space(cfg)
    if graph_is_current(cfg, space) or len(space) < world:
        return
    build_shard(cfg, rank, world, progress=progress and rank == 0, space=space)
    distributed.barrier()
    if rank == 0:
        merge_shards(cfg, world, progress=progress, space=space)
    distributed.barrier()
