"""The exact top-M neighbour graph of the caption label space (``caption_space``) at COCO scale.

Brute force needs N^2/2 image pairs x 25 caption-pair EMD solves: ~1.6e11 solves for the 113,287
Karpathy training images, years of CPU. ``build_caption_graph`` gets the *same* graph (indices and
distances, ties by index) with far fewer solves, by pruning with lower bounds of W(X, Y):

* pair level, WCD ``||sum w_i x_i - sum w_j y_j||`` and RWMD (max of the two one-sided
  relaxations) are both <= WMD;
* set level, Eq. 13 with a pair bound in place of WMD is <= W(X, Y), since min and sum are monotone.

For each query (``_Searcher.query``): a sweep bounds W against all N images at once (set level,
pair bound max(WCD, one-sided RWMD), both dense/sparse matrix products in float32 made conservative
by a rigorous rounding slack); candidates are visited by increasing sweep bound, in batches tightened
with the full pair bound max(WCD, RWMD), and solved exactly only while their bound can still beat
the current M-th best exact distance. Inside one exact W(X, Y), caption pairs go by increasing
bound; a pair is solved only if it could still lower its row or column minimum, and the candidate
is abandoned once its partly exact Eq. 13 bound exceeds the M-th best. Every exact value comes from
the same ``wmd`` call as brute force, so results are identical bit for bit, not just close.
"""
from __future__ import annotations

import bisect
import hashlib
import json
import multiprocessing as mp
import os
import sys
import time
import zipfile
from concurrent.futures import ProcessPoolExecutor, as_completed
from concurrent.futures.process import BrokenProcessPool
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Sequence

import numpy as np
from tqdm import tqdm

from capcore.atomic import atomic_path, write_text
from capcore.errors import CapawareError
from embedder.labels.caption_space import CaptionSpace
from embedder.labels.graph import NeighbourGraph, check_rows, top_m_sorted, write_graph
from embedder.labels.wmd import EMPTY_WMD, pair_lower_bounds, wmd

_TOL = 1e-9
"""Slack for float64 bounds vs exact solves (their rounding differs by ~1e-15): pruning stays safe."""


class _Searcher:
    """Per-process state of the pruned search: float32 centroids and word vectors, sparse nBOW rows."""

    def __init__(self, space: CaptionSpace, m: int, block: int = 2048):
        self.space, self.m, self.block = space, m, block
        self.sweep_seconds = 0.0  # CPU time in set_bounds: the part that grows as N^2
        prep = space.prep
        self.cent = prep.centroids().astype(np.float32)
        self.sqn = np.einsum("ij,ij->i", self.cent, self.cent)
        self.vec32 = prep.vectors.astype(np.float32)  # exact: the vectors are float32 values widened
        self.vsqn = np.einsum("ij,ij->i", self.vec32, self.vec32)
        self.nbow = prep.nbow
        self.empty = prep.lengths == 0
        self.any_empty = bool(self.empty.any())
        # rigorous bound on the float32 error of |a|^2 + |b|^2 - 2 a.b for |a|, |b| <= 1, with margin 2
        self.delta = 8.0 * prep.vectors.shape[1] * 2.0 ** -24

    def _lower_dist(self, sqa, sqb, dot) -> np.ndarray:
        """Conservative Euclidean distances from float32 norms and dot products: never above the truth."""
        sq = sqa[:, None] + sqb[None, :] - 2.0 * dot
        return np.sqrt(np.maximum(sq - self.delta, 0.0))

    def set_bounds(self, q0: int, q1: int) -> np.ndarray:
        """float64 [q1 - q0, N] Eq. 13 lower bounds of images q0..q1 against all, self = inf.

        Pair bound = max(WCD, one-sided RWMD moving the candidate's words to the query caption). Both
        are matrix products: the one-sided RWMD is linear in the candidate's nBOW, nBOW @ G with
        G[v, x] = distance from word v to the nearest word of query caption x.
        """
        prep, ptr = self.space.prep, self.space.img_ptr
        n = len(self.space)
        c0, c1 = ptr[q0], ptr[q1]
        q_seg = ptr[q0:q1] - c0
        qc, qn, qe = self.cent[c0:c1], self.sqn[c0:c1], self.empty[c0:c1]
        # G: [V, query captions]; empty query captions get a dummy column (overwritten below)
        q_tok, _, q_ptr = prep.gather(np.arange(c0, c1))
        words, inv = np.unique(q_tok, return_inverse=True)
        g = np.zeros((len(prep.words), c1 - c0))
        full = np.flatnonzero(np.diff(q_ptr) > 0)
        if len(full):
            dw = self._lower_dist(self.vsqn, self.vsqn[words], self.vec32 @ self.vec32[words].T)
            g[:, full] = np.minimum.reduceat(dw[:, inv], q_ptr[:-1][full], axis=1)
        out = np.empty((q1 - q0, n))
        for b0 in range(0, n, self.block):
            b1 = min(n, b0 + self.block)
            d0, d1 = ptr[b0], ptr[b1]
            lb = self._lower_dist(qn, self.sqn[d0:d1], qc @ self.cent[d0:d1].T).astype(np.float64)
            np.maximum(lb, (self.nbow[d0:d1] @ g).T, out=lb)
            if self.any_empty:  # empty captions: the bound is the exact constant
                de = self.empty[d0:d1]
                lb[np.ix_(qe, ~de)] = EMPTY_WMD
                lb[np.ix_(~qe, de)] = EMPTY_WMD
                lb[np.ix_(qe, de)] = 0.0
            d_seg = ptr[b0:b1] - d0
            rowmin = np.minimum.reduceat(lb, d_seg, axis=1)  # [query captions, block images]
            colmin = np.minimum.reduceat(lb, q_seg, axis=0)  # [query images, block captions]
            out[:, b0:b1] = np.add.reduceat(rowmin, q_seg, axis=0) + np.add.reduceat(colmin, d_seg, axis=1)
        out[np.arange(q1 - q0), np.arange(q0, q1)] = np.inf
        return out

    def exact(self, xs: np.ndarray, ys: np.ndarray, lb: np.ndarray, worst: float = np.inf
              ) -> tuple[float | None, int]:
        """W(X, Y) exactly, or None once it provably exceeds ``worst`` (then it cannot enter the top-M).

        Caption pairs are visited by increasing bound; a pair is solved only if its bound could still
        lower its row or column minimum. Each solve replaces a bound by the exact value, which raises
        the running Eq. 13 lower bound; the candidate is abandoned as soon as that exceeds ``worst``.
        """
        kx, ky = lb.shape
        rowmin = [np.inf] * kx  # minima over solved pairs: at the end, the exact row/column minima
        colmin = [np.inf] * ky
        low = (lb - _TOL).tolist()  # per pair: bound, replaced by the exact value once solved
        rowlow = [min(r) for r in low]
        collow = [min(c) for c in zip(*low)]
        solves = 0
        lengths = self.space.prep.lengths
        prep = self.space.prep
        for p in np.argsort(lb, axis=None, kind="stable").tolist():
            i, j = divmod(p, ky)
            lij = low[i][j]
            if lij >= rowmin[i] and lij >= colmin[j]:
                continue
            x, y = int(xs[i]), int(ys[j])
            v = wmd(prep, x, y)
            solves += bool(lengths[x] and lengths[y])
            if v < rowmin[i]:
                rowmin[i] = v
            if v < colmin[j]:
                colmin[j] = v
            if worst < np.inf:
                low[i][j] = v
                rowlow[i] = min(low[i])
                collow[j] = min(r[j] for r in low)
                if sum(rowlow) + sum(collow) - _TOL > worst:
                    return None, solves
        return float(np.array(rowmin).sum() + np.array(colmin).sum()), solves

    def query(self, q: int, bound: np.ndarray) -> tuple[list[int], list[float], int]:
        """Exact top-m of image ``q`` by (W, index), given its row of ``set_bounds``."""
        m, ptr = self.m, self.space.img_ptr
        xs = self.space.captions_of(q)
        best: list[tuple[float, int]] = []
        worst = np.inf
        solves = 0
        remaining = np.flatnonzero(np.arange(len(bound)) != q)
        k = max(8 * m, 256)  # candidates are ordered lazily: argpartition a growing head, sort only it
        batch_size = max(4 * m, 64)
        stop = False
        while len(remaining) and not stop:
            if len(remaining) > k:
                part = np.argpartition(bound[remaining], k)
                head, rest_min = remaining[part[:k]], bound[remaining[part[k]]]
                remaining = remaining[part[k:]]
            else:
                head, rest_min, remaining = remaining, np.inf, remaining[:0]
            k *= 8
            head = head[np.lexsort((head, bound[head]))]
            for pos in range(0, len(head), batch_size):
                batch = head[pos:pos + batch_size]
                if len(best) == m and bound[batch[0]] - _TOL > worst:
                    stop = True  # every later candidate has a bound at least this large
                    break
                lens = ptr[batch + 1] - ptr[batch]
                seg = np.zeros(len(batch) + 1, dtype=np.int64)
                np.cumsum(lens, out=seg[1:])
                ys_all = np.repeat(ptr[batch] - seg[:-1], lens) + np.arange(seg[-1])
                lb = pair_lower_bounds(self.space.prep, xs, ys_all, wcd=False)
                wcd = self._lower_dist(self.sqn[xs], self.sqn[ys_all], self.cent[xs] @ self.cent[ys_all].T)
                both = ~self.empty[xs][:, None] & ~self.empty[ys_all][None, :]
                np.maximum(lb, np.where(both, wcd, 0.0), out=lb)
                set_lb = (np.minimum.reduceat(lb, seg[:-1], axis=1).sum(axis=0)
                          + np.add.reduceat(lb.min(axis=0), seg[:-1]))
                set_lb = np.maximum(set_lb, bound[batch])
                for o in np.lexsort((batch, set_lb)).tolist():
                    if len(best) == m and set_lb[o] - _TOL > worst:
                        break
                    c = int(batch[o])
                    w, s = self.exact(xs, ys_all[seg[o]:seg[o + 1]], lb[:, seg[o]:seg[o + 1]], worst)
                    solves += s
                    item = (w, c)
                    if w is not None and (len(best) < m or item < best[-1]):
                        bisect.insort(best, item)
                        del best[m:]
                        if len(best) == m:
                            worst = best[-1][0]
            batch_size = min(2 * batch_size, 2048)
            if len(best) == m and rest_min - _TOL > worst:
                break
        return [c for _, c in best], [w for w, _ in best], solves

    def chunk(self, q0: int, q1: int, sub: int = 64) -> tuple[np.ndarray, np.ndarray, int]:
        idx = np.empty((q1 - q0, self.m), np.int32)
        dist = np.empty((q1 - q0, self.m), np.float64)
        solves = 0
        for s0 in range(q0, q1, sub):
            s1 = min(q1, s0 + sub)
            start = time.process_time()
            bounds = self.set_bounds(s0, s1)
            self.sweep_seconds += time.process_time() - start
            for q in range(s0, s1):
                i, d, s = self.query(q, bounds[q - s0])
                idx[q - q0], dist[q - q0] = i, d
                solves += s
        return idx, dist, solves


_WORKER: _Searcher | None = None


def _init_worker(space: CaptionSpace, m: int) -> None:
    global _WORKER
    _WORKER = _Searcher(space, m)


def _chunk_file(resume_dir: Path, q0: int, q1: int) -> Path:
    return resume_dir / f"chunk_{q0:09d}_{q1:09d}.npz"


def _save_chunk(path: Path | None, fingerprint: str, idx, dist, solves) -> None:
    if path is None:
        return
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as f:
            np.savez(f, nn_idx=idx, nn_dist=dist, solves=np.int64(solves), fingerprint=np.str_(fingerprint))


def _load_chunk(path: Path, fingerprint: str):
    try:
        with np.load(path) as z:
            if str(z["fingerprint"]) != fingerprint:
                return None
            return z["nn_idx"], z["nn_dist"], int(z["solves"])
    except (OSError, KeyError, ValueError, EOFError, zipfile.BadZipFile):
        return None  # unreadable chunk: recompute it


def _run_chunk(task, searcher: _Searcher | None = None):
    """One chunk of queries, saved; returns (q0, q1, idx, dist, solves, CPU seconds, sweep CPU seconds)."""
    q0, q1, path, fingerprint = task
    searcher = searcher or _WORKER
    start, sweep = time.process_time(), searcher.sweep_seconds
    idx, dist, solves = searcher.chunk(q0, q1)
    _save_chunk(path, fingerprint, idx, dist, solves)
    return q0, q1, idx, dist, solves, time.process_time() - start, searcher.sweep_seconds - sweep


@contextmanager
def _single_threaded_blas_env():
    """Spawned workers inherit this env: one BLAS thread each, so W workers use W cores, not W^2."""
    names = ("OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")
    saved = {k: os.environ.get(k) for k in names}
    os.environ.update({k: "1" for k in names})
    try:
        yield
    finally:
        for k, v in saved.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v


def _graph_attrs(space: CaptionSpace, m: int, solves: int, method: str) -> dict:
    return {"label_space": space.name, "m": m, "params": json.dumps(space.params(), sort_keys=True),
            "captions_sha256": space.captions_sha256, "emd_solves": int(solves), "method": method}


@dataclass
class _Tally:
    """The graph's rows as chunks arrive (row r holds query image lo + r), and what they cost."""
    lo: int
    idx: np.ndarray
    dist: np.ndarray
    solves: int = 0
    compute: float = 0.0  # CPU seconds inside chunks, summed over processes
    sweep: float = 0.0  # of which inside the set-level sweep
    reused: int = 0  # images whose chunk was loaded from the resume folder

    def put(self, q0: int, q1: int, idx: np.ndarray, dist: np.ndarray, solves: int, sec: float = 0.0,
            sweep: float = 0.0) -> None:
        self.idx[q0 - self.lo:q1 - self.lo], self.dist[q0 - self.lo:q1 - self.lo] = idx, dist
        self.solves += solves
        self.compute += sec
        self.sweep += sweep


def _resume_folder(resume_dir, fingerprint: str, space: CaptionSpace, n: int, m: int, chunk: int) -> Path | None:
    """One sub-folder per build identity: builds of other spaces/settings sharing resume_dir never mix."""
    if resume_dir is None:
        return None
    rdir = Path(resume_dir) / f"caption_graph-{fingerprint[:16]}"
    manifest = rdir / "manifest.json"
    if not manifest.is_file():
        write_text(manifest, json.dumps({"fingerprint": fingerprint, "n": n, "m": m, "chunk": chunk,
                                         "params": space.params()}, indent=1))
    return rdir


def _solve_chunks(todo: list, space: CaptionSpace, m: int, workers: int, path, tally: _Tally, bar) -> None:
    """The chunks still to do, in this process or in ``workers`` spawned ones."""
    pool = None
    try:
        if workers <= 1 or len(todo) <= 1:
            searcher = _Searcher(space, m) if todo else None
            results = (_run_chunk(task, searcher) for task in todo)
        else:
            # concurrent.futures, not multiprocessing.Pool: a worker killed mid-chunk (out of memory)
            # raises BrokenProcessPool here, where a Pool would wait for its result forever.
            pool = ProcessPoolExecutor(min(workers, len(todo)), mp.get_context("spawn"), _init_worker, (space, m))
            with _single_threaded_blas_env():  # workers start at submit and inherit this env
                futures = [pool.submit(_run_chunk, task) for task in todo]
            results = (_chunk_result(future, path) for future in as_completed(futures))
        for q0, q1, i, d, s, sec, sw in results:
            tally.put(q0, q1, i, d, s, sec, sw)
            bar.update(q1 - q0)
            bar.set_postfix(solves=tally.solves)
    except BaseException:  # Ctrl-C or a dead worker: drop the queued chunks, do not wait for them
        if pool is not None:
            pool.shutdown(wait=False, cancel_futures=True)
        raise
    if pool is not None:
        pool.shutdown()


def build_caption_graph(space: CaptionSpace, m: int = 30, workers: int = 2, chunk: int = 512,
                        resume_dir: str | Path | None = None, path: str | Path | None = None,
                        progress: bool = True, rows: tuple[int, int] | None = None,
                        _chunks: Sequence[int] | None = None) -> NeighbourGraph:
    """Exact top-``m`` neighbours of every image under Eq. 13, pruned; identical to brute force.

    Queries are cut into chunks of ``chunk`` images, solved by ``workers`` processes (spawned; 1 =
    in this process; results do not depend on it). With ``resume_dir`` every finished chunk is saved
    atomically in a sub-folder named after the build's identity (captions, vectors, stop words, m,
    chunk) and a rerun skips it; an unreadable chunk file is recomputed. With ``path`` the graph is
    written with ``write_graph``. ``rows=(lo, hi)`` searches only those query images (against all
    N; a shard of the graph for another machine): the graph then has hi - lo rows, equal to rows
    lo..hi of the whole one, since each query's result does not depend on how queries are grouped.
    ``attrs["emd_solves"]`` counts exact caption-pair WMD evaluations;
    ``graph.stats`` adds timings and the brute-force count. ``_chunks`` (chunk numbers to run, then
    stop and return None) exists for tests that simulate an interrupted build.
    """
    n = len(space)
    if m >= n:
        raise CapawareError(space.name, f"asked for {m} neighbours of {n} images", "lower graph.m below the set size")
    fingerprint = hashlib.sha256(json.dumps({"params": space.params(), "m": m, "chunk": chunk, "n": n},
                                            sort_keys=True).encode()).hexdigest()
    rdir = _resume_folder(resume_dir, fingerprint, space, n, m, chunk)
    lo, hi = check_rows(rows, n)
    # chunk edges on the global grid k * chunk: a shard's inner chunks are the whole build's chunks
    starts = [lo, *range((lo // chunk + 1) * chunk, hi, chunk)]
    ends = starts[1:] + [hi]
    tally = _Tally(lo, np.empty((hi - lo, m), np.int32), np.empty((hi - lo, m), np.float64))
    todo = []
    for c in range(len(starts)) if _chunks is None else _chunks:
        q0, q1 = starts[c], ends[c]
        path_c = _chunk_file(rdir, q0, q1) if rdir is not None else None
        got = _load_chunk(path_c, fingerprint) if path_c is not None and path_c.is_file() else None
        if got is None:
            todo.append((q0, q1, path_c, fingerprint))
        else:
            tally.put(q0, q1, *got)
            tally.reused += q1 - q0
    t0 = time.perf_counter()
    with tqdm(total=sum(q1 - q0 for q0, q1, _, _ in todo), desc="caption graph", unit="img",
              disable=not progress, leave=False) as bar:
        _solve_chunks(todo, space, m, workers, path, tally, bar)
    if _chunks is not None:
        return None
    attrs = _graph_attrs(space, m, tally.solves, "pruned: set-level WCD/RWMD bounds, exact EMD where needed")
    graph = NeighbourGraph(tally.idx, tally.dist.astype(np.float32), attrs)
    graph.stats = {"seconds": time.perf_counter() - t0, "chunk_cpu_seconds": tally.compute,
                   "sweep_cpu_seconds": tally.sweep, "emd_solves": tally.solves, "reused_images": tally.reused,
                   "brute_force_solves": _brute_solves(space)}
    if path is not None:
        write_graph(path, graph.nn_idx, graph.nn_dist, attrs)
    if progress:
        _say_built(graph, n, m, lo, hi)
    return graph


def _say_built(graph: NeighbourGraph, n: int, m: int, lo: int, hi: int) -> None:
    solves, brute = graph.stats["emd_solves"], graph.stats["brute_force_solves"]
    vs = f" ({brute / max(solves, 1):.1f}x fewer than brute force's {brute:,})" if (lo, hi) == (0, n) else ""
    what = f"{n} images" if (lo, hi) == (0, n) else f"images [{lo}, {hi}) of {n}"
    print(f"caption graph: {what}, m={m}, {solves:,} exact caption-pair WMDs{vs}, "
          f"{graph.stats['seconds']:.1f} s, {graph.stats['reused_images']} images resumed", file=sys.stderr)


def _chunk_result(future, path: Path | None):
    try:
        return future.result()
    except BrokenProcessPool:
        raise CapawareError(path or "caption graph", "a graph worker process died (killed, e.g. out of memory)",
                            "rerun (finished chunks are kept and resumed) or lower graph.workers") from None


def _brute_solves(space: CaptionSpace) -> int:
    """Caption-pair WMDs brute force evaluates: sum over image pairs a < b of |X_a| |X_b| (non-empty)."""
    full = (space.prep.lengths > 0).astype(np.int64)
    k = np.add.reduceat(full, space.img_ptr[:-1]).astype(np.float64)
    return int(round((k.sum() ** 2 - (k ** 2).sum()) / 2))


def build_caption_graph_bruteforce(space: CaptionSpace, m: int, progress: bool = True) -> NeighbourGraph:
    """Reference: exact W for every image pair (no pruning, no cache), then ``top_m_sorted``."""
    n = len(space)
    if m >= n:
        raise CapawareError(space.name, f"asked for {m} neighbours of {n} images", "lower graph.m below the set size")
    full = np.zeros((n, n))
    solves = 0
    lengths = space.prep.lengths
    for a in tqdm(range(n), desc="caption graph (brute force)", disable=not progress, leave=False):
        xs = space.captions_of(a)
        for b in range(a + 1, n):
            ys = space.captions_of(b)
            pair = np.array([[wmd(space.prep, int(x), int(y)) for y in ys] for x in xs])
            solves += int((lengths[xs][:, None] > 0).sum() * (lengths[ys] > 0).sum())
            full[a, b] = full[b, a] = pair.min(axis=1).sum() + pair.min(axis=0).sum()
    nn_idx, nn_dist = top_m_sorted(full, np.arange(n), m)
    return NeighbourGraph(nn_idx, nn_dist, _graph_attrs(space, m, solves, "brute force: exact EMD for every pair"))
