"""Word Mover's Distance between captions and the caption-set distance of Kim et al. (Eq. 13).

WMD is computed the way gensim's ``KeyedVectors.wmdistance`` does it, so the two agree to rounding:
unit-normalised word vectors (float32 norm, as ``get_vector(norm=True)``), Euclidean ground
distance, nBOW weights = word count / caption length (after OOV removal), exact EMD with POT.
Two deliberate differences from gensim, both for robustness at COCO scale:

* an *empty* caption (no word with a vector, see ``wordvecs.caption_words``) has WMD ``EMPTY_WMD``
  = 2.0 to any non-empty caption (the largest WMD between unit vectors) and 0 to another empty
  one; gensim returns ``inf``, which would poison Eq. 13 sums and neighbour ranks;
* two captions whose words all have identical vectors get 0, where gensim returns ``inf``.

Captions are prepared once (``prepare_captions``): unique word ids, nBOW weights and float64 unit
vectors, so a pair costs a gather, a small ``cdist`` and one EMD solve. Cheap lower bounds (word
centroid distance WCD and relaxed WMD) let ``caption_graph`` skip most solves.
"""
from __future__ import annotations

from dataclasses import dataclass
from functools import cached_property
from typing import Sequence

import numpy as np
import ot
from scipy.sparse import csr_matrix
from scipy.spatial.distance import cdist

from embedder.labels.wordvecs import caption_words, stopword_set, unit_vectors

EMPTY_WMD = 2.0
"""WMD between an empty and a non-empty caption: the diameter of the unit sphere bounds any WMD."""

_MAX_ITER = 100000


def _probe_emd_c():
    """POT's compiled network-simplex entry point, if this POT has the signature we know.

    ``ot.emd2`` spends ~30 us per call on backend dispatch and checks around a ~3 us solve of our
    5x5 problems; calling the same solver directly is 10x faster at COCO scale. Verified against
    ``ot.emd2`` on import; any surprise falls back to ``ot.emd2``.
    """
    try:
        from ot.lp.emd_wrap import emd_c
        a = np.array([0.25, 0.75])
        b = np.array([0.5, 0.5])
        m = np.array([[0.0, 1.0], [2.0, 0.5]])
        _, cost, _, _, code = emd_c(a, b, m, _MAX_ITER, 1, None, None)
        if code == 1 and abs(cost - ot.emd2(a, b, m)) < 1e-12:
            return emd_c
    except Exception:  # any import/signature change: use the public API
        pass
    return None


_EMD_C = _probe_emd_c()


def _emd_balanced(a: np.ndarray, b: np.ndarray, m: np.ndarray) -> float:
    if _EMD_C is not None:
        _, cost, _, _, code = _EMD_C(a, b, m, _MAX_ITER, 1, None, None)
        if code == 1:
            return float(cost)
    return float(ot.emd2(a, b, m, numItermax=_MAX_ITER, check_marginals=False, center_dual=False))


@dataclass
class PreparedCaptions:
    """C captions ready for WMD: per caption its unique word ids (sorted) and nBOW weights."""

    words: list[str]  # [V] the words used, sorted
    vectors: np.ndarray  # [V, d] float64 unit vectors (gensim's float32 normalisation, widened)
    tok: np.ndarray  # [T] int32 word ids, caption after caption
    wts: np.ndarray  # [T] float64 nBOW weights (each caption's sum to 1)
    ptr: np.ndarray  # [C + 1] int64 caption i owns tok[ptr[i]:ptr[i + 1]]; empty captions own nothing

    def __len__(self) -> int:
        return len(self.ptr) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.ptr)

    def caption(self, i: int) -> tuple[np.ndarray, np.ndarray]:
        s, e = self.ptr[i], self.ptr[i + 1]
        return self.tok[s:e], self.wts[s:e]

    @cached_property
    def split(self) -> list[tuple[np.ndarray, np.ndarray, float]]:
        """Per caption (word ids, weights, weight sum) as ready views: saves microseconds per WMD."""
        toks, wts = np.split(self.tok, self.ptr[1:-1]), np.split(self.wts, self.ptr[1:-1])
        return [(t, w, float(w.sum())) for t, w in zip(toks, wts)]

    def __getstate__(self):
        """Pickle the arrays only; the cached views and sparse matrix are rebuilt on demand."""
        return {k: v for k, v in self.__dict__.items() if k not in ("split", "nbow")}

    def gather(self, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Tokens, weights and local ``ptr`` of captions ``ids``, concatenated (vectorised slicing)."""
        ids = np.asarray(ids, dtype=np.int64)
        lens = self.ptr[ids + 1] - self.ptr[ids]
        local = np.zeros(len(ids) + 1, dtype=np.int64)
        np.cumsum(lens, out=local[1:])
        flat = np.repeat(self.ptr[ids] - local[:-1], lens) + np.arange(local[-1])
        return self.tok[flat], self.wts[flat], local

    @cached_property
    def nbow(self) -> csr_matrix:
        """[C, V] sparse nBOW rows (views of ``wts``/``tok``/``ptr``)."""
        return csr_matrix((self.wts, self.tok, self.ptr), shape=(len(self), len(self.words)))

    def centroids(self, ids: np.ndarray | None = None) -> np.ndarray:
        """float64 [len(ids), d] nBOW-weighted sums of unit vectors (zero for empty captions)."""
        nbow = self.nbow if ids is None else self.nbow[np.asarray(ids, dtype=np.int64)]
        return np.asarray(nbow @ self.vectors)


def prepare_captions(captions: Sequence[str | Sequence[str]], kv, stopwords: str = "gensim") -> PreparedCaptions:
    """Tokenise, filter (stop words, OOV, fallback rule) and index C captions against vectors ``kv``."""
    stop = stopword_set(stopwords)
    kept = [caption_words(c, kv.key_to_index, stop) for c in captions]
    words = sorted({w for ws in kept for w in ws})
    index = {w: i for i, w in enumerate(words)}
    toks, wts, lens = [], [], []
    for ws in kept:
        ids, counts = np.unique(np.fromiter((index[w] for w in ws), dtype=np.int64, count=len(ws)),
                                return_counts=True)
        toks.append(ids)
        wts.append(counts / float(len(ws)) if len(ws) else counts.astype(np.float64))  # gensim's nbow
        lens.append(len(ids))
    ptr = np.zeros(len(kept) + 1, dtype=np.int64)
    np.cumsum(lens, out=ptr[1:])
    d = kv.vector_size
    vectors = unit_vectors(kv, words).astype(np.float64) if words else np.zeros((0, d))
    cat = (lambda xs, dt: np.concatenate(xs).astype(dt) if xs else np.zeros(0, dt))
    return PreparedCaptions(words, vectors, cat(toks, np.int32), cat(wts, np.float64), ptr)


def wmd(p: PreparedCaptions, i: int, j: int) -> float:
    """Exact WMD between prepared captions ``i`` and ``j``.

    The pair is put in canonical order first so that ``wmd(i, j)`` and ``wmd(j, i)`` are the same
    float bit for bit; brute-force and pruned neighbour searches then agree exactly.
    """
    if i == j:
        return 0.0
    if i > j:
        i, j = j, i
    split = p.split
    ta, wa, sa = split[i]
    tb, wb, sb = split[j]
    na, nb = len(ta), len(tb)
    if not na or not nb:
        return 0.0 if na == nb else EMPTY_WMD
    m = cdist(p.vectors[ta], p.vectors[tb])
    if na == 1:  # all mass leaves one word: the transport plan is forced
        return float(m[0] @ wb)
    if nb == 1:
        return float(wa @ m[:, 0])
    return _emd_balanced(wa, wb * (sa / sb), m)  # equal masses, as ot.emd2 enforces


def wcd(p: PreparedCaptions, i: int, j: int) -> float:
    """Word centroid distance ||sum w_i x_i - sum w_j y_j|| <= WMD (Kusner et al. 2015)."""
    li, lj = p.lengths[i], p.lengths[j]
    if li == 0 or lj == 0:
        return 0.0 if li == lj else EMPTY_WMD
    c = p.centroids(np.array([i, j]))
    return float(np.linalg.norm(c[0] - c[1]))


def rwmd(p: PreparedCaptions, i: int, j: int) -> float:
    """Relaxed WMD: the larger of the two one-sided relaxations (each word goes to its nearest word)."""
    ta, wa = p.caption(i)
    tb, wb = p.caption(j)
    if len(ta) == 0 or len(tb) == 0:
        return 0.0 if len(ta) == len(tb) else EMPTY_WMD
    m = cdist(p.vectors[ta], p.vectors[tb])
    return float(max(wa @ m.min(axis=1), wb @ m.min(axis=0)))


def pair_lower_bounds(p: PreparedCaptions, xs: np.ndarray, ys: np.ndarray, wcd: bool = True) -> np.ndarray:
    """float64 [len(xs), len(ys)] max(WCD, RWMD) <= WMD for few captions ``xs`` against many ``ys``.

    Vectorised over ``ys``: one ``cdist`` between the distinct words of ``ys`` and those of ``xs``;
    the x -> y side is a per-caption minimum then a product with x's nBOW columns, the y -> x side a
    sparse product of y's nBOW rows. Empty captions get their exact WMD (a constant). ``wcd=False``
    skips the centroid term (for callers that bring their own WCD).
    """
    xs = np.asarray(xs, dtype=np.int64)
    ys = np.asarray(ys, dtype=np.int64)
    out = np.full((len(xs), len(ys)), EMPTY_WMD)
    y_tok, y_w, y_ptr = p.gather(ys)
    y_full = np.diff(y_ptr) > 0
    x_tok, x_w, x_ptr = p.gather(xs)
    x_full = np.diff(x_ptr) > 0
    out[~x_full] = np.where(y_full, EMPTY_WMD, 0.0)
    starts, x_starts = y_ptr[:-1][y_full], x_ptr[:-1][x_full]
    if not len(starts) or not len(x_starts):
        return out
    uw, inv = np.unique(y_tok, return_inverse=True)
    ux, x_inv = np.unique(x_tok, return_inverse=True)  # the query captions share most words
    d = cdist(p.vectors[uw], p.vectors[ux])  # [distinct words of ys, distinct words of xs]
    # x -> y: each word of x to its nearest word of y, weighted by x's nBOW. The minimum over each
    # y's words runs as one row-gather pass per word position (reduceat is several times slower).
    y_len = np.diff(y_ptr)[y_full]
    first = y_ptr[:-1][y_full]
    near_y = d[inv[first]]  # [full ys, distinct words of xs]
    for k in range(1, int(y_len.max())):
        sel = np.flatnonzero(y_len > k)
        near_y[sel] = np.minimum(near_y[sel], d[inv[first[sel] + k]])
    x_of = np.repeat(np.arange(len(x_starts)), np.diff(np.append(x_starts, len(x_tok))))
    x_weights = np.zeros((len(ux), len(x_starts)))  # [distinct words of xs, full xs] nBOW columns
    x_weights[x_inv, x_of] = x_w
    side_x = near_y @ x_weights  # [full ys, full xs]
    # y -> x: each word of y to its nearest word of x, weighted by y's nBOW (a sparse product)
    near_x = np.where(x_weights.T[:, None, :] > 0, d[None, :, :], np.inf).min(axis=2).T  # [uw, full xs]
    y_nbow = csr_matrix((y_w, inv, np.append(first, len(y_tok))), shape=(len(first), len(uw)))
    bound = np.maximum(side_x, y_nbow @ near_x).T  # [full xs, full ys]
    if wcd:
        cent_x, cent_y = p.centroids(xs[x_full]), p.centroids(ys[y_full])
        bound = np.maximum(bound, cdist(cent_x, cent_y))
    out[np.ix_(x_full, y_full)] = bound
    return out


def set_distance(pair: np.ndarray) -> float:
    """Eq. 13 from the [|X|, |Y|] matrix of caption WMDs: sum of row minima + sum of column minima."""
    return float(pair.min(axis=1).sum() + pair.min(axis=0).sum())


def caption_set_distance(x: Sequence[str | Sequence[str]], y: Sequence[str | Sequence[str]], kv,
                         stopwords: str = "gensim") -> float:
    """W(X, Y) of Kim et al. Eq. 13 between two images' caption sets (strings or token lists)."""
    p = prepare_captions(list(x) + list(y), kv, stopwords)
    nx = len(x)
    pair = np.array([[wmd(p, i, nx + j) for j in range(len(y))] for i in range(nx)])
    return set_distance(pair)


def wmd_tokens(doc1: Sequence[str], doc2: Sequence[str], kv) -> float:
    """Our WMD between two token lists with no stop-word removal: the like of ``kv.wmdistance``."""
    return wmd(prepare_captions([doc1, doc2], kv, stopwords="none"), 0, 1)
