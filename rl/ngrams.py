"""Token-id captions as n-grams: every 1..n-gram of a batch of rows packed into one int64 key, counted
with one ``np.unique`` (no Python loop over captions). The CIDEr-D and BLEU-4 rewards (``rl.cider``,
``rl.bleu``) are both built on this table.

Word ids are 1..V inside a caption and 0 ends it; a key is the n-gram's ids as digits in base V + 1
(bijective, since no digit is 0), so ``base ** n`` must fit in an int64.
"""
from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from capcore.errors import CapawareError

N = 4  # n-gram orders 1..N


def caption_lengths(seqs: np.ndarray) -> np.ndarray:
    """Words before the first 0 in each row (the row's length if it has no 0)."""
    zero = seqs == 0
    return np.where(zero.any(1), zero.argmax(1), seqs.shape[1])


def with_end_token(seqs: np.ndarray, end: int) -> np.ndarray:
    """[M, T] -> [M, T + 1]: ``end`` written at each row's first 0 (self-critical.pytorch's array_to_str
    keeps that 0 as a word); a row with no 0 keeps no end token; anything after the end becomes 0."""
    seqs = np.asarray(seqs, dtype=np.int64)
    M, T = seqs.shape
    lengths = caption_lengths(seqs)
    out = np.zeros((M, T + 1), dtype=np.int64)
    out[:, :T] = np.where(np.arange(T)[None, :] < lengths[:, None], seqs, 0)
    ended = lengths < T
    out[np.flatnonzero(ended), lengths[ended]] = end
    return out


def _check_base(base: int, n: int) -> None:
    if base < 2 or base ** n >= 2 ** 63:
        raise CapawareError("cider", f"vocabulary of {base - 1} words cannot pack {n}-grams into int64 keys",
                            f"use fewer than {int(2 ** (63 / n)) - 1} words")


@dataclass
class NgramTable:
    """Distinct n-grams of each row: one entry per (row, n-gram)."""
    row: np.ndarray  # [E] which caption
    dense: np.ndarray  # [E] index into keys
    count: np.ndarray  # [E] term frequency in that caption
    keys: np.ndarray  # [K] sorted distinct int64 keys of the whole table
    order: np.ndarray  # [K] n - 1 of each key
    lengths: np.ndarray  # [rows] words before the first EOS


def ngram_table(seqs: np.ndarray, base: int, n: int = N) -> NgramTable:
    """All 1..n-grams of every row of ``seqs`` [M, T] (tokens from the first 0 on ignored)."""
    seqs = np.asarray(seqs, dtype=np.int64)
    if seqs.ndim != 2:
        raise ValueError(f"captions must be [M, T] token ids, got shape {seqs.shape}")
    if seqs.size and (seqs.min() < 0 or seqs.max() >= base):
        raise ValueError(f"token ids must lie in 0..{base - 1}, got {seqs.min()}..{seqs.max()}")
    M, T = seqs.shape
    lengths = caption_lengths(seqs)
    inside = np.arange(T)[None, :] < lengths[:, None]
    seqs = np.where(inside, seqs, 0)  # garbage after EOS can neither match nor overflow a key
    rows, keys, orders = [], [], []
    key = np.zeros((M, T), dtype=np.int64)
    for k in range(1, min(n, T) + 1):
        width = T - k + 1
        key = key[:, :width] * base + seqs[:, k - 1:k - 1 + width]  # key of the k-gram starting at t
        r, t = np.nonzero(np.arange(width)[None, :] + k <= lengths[:, None])
        rows.append(r)
        keys.append(key[r, t])
        orders.append(np.full(len(r), k - 1, dtype=np.int8))
    rows = np.concatenate(rows) if rows else np.zeros(0, np.int64)
    keys = np.concatenate(keys) if keys else np.zeros(0, np.int64)
    orders = np.concatenate(orders) if orders else np.zeros(0, np.int8)
    uniq, inverse = np.unique(keys, return_inverse=True)
    K = max(len(uniq), 1)
    pairs, counts = np.unique(rows * K + inverse, return_counts=True)
    order = np.zeros(len(uniq), dtype=np.int8)
    order[inverse] = orders
    return NgramTable(pairs // K, pairs % K, counts, uniq, order, lengths)


def decode_key(key: int, base: int) -> tuple[int, ...]:
    """Word ids of a packed n-gram key (its base-``base`` digits, all non-zero)."""
    digits = []
    while key:
        key, d = divmod(int(key), base)
        digits.append(d)
    return tuple(reversed(digits))


def _ranges(starts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """Concatenation of arange(s, s + c) for each (s, c), without a Python loop."""
    counts = np.asarray(counts, dtype=np.int64)
    before = np.cumsum(counts) - counts
    return np.repeat(np.asarray(starts, dtype=np.int64) - before, counts) + np.arange(counts.sum())


def image_ngram_keys(tab: NgramTable, n_cands: int, cand_group: np.ndarray,
                     ref_group: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """For a table over candidates (rows ``< n_cands``) then references: each entry's (image, n-gram) key,
    so that a candidate's n-gram meets the same n-gram of its own image's references in one sort, and
    which entries are candidates'."""
    K = max(len(tab.keys), 1)
    is_cand = tab.row < n_cands
    group = np.where(is_cand, cand_group[np.minimum(tab.row, n_cands - 1)],
                     ref_group[np.clip(tab.row - n_cands, 0, max(len(ref_group) - 1, 0))])
    return group * K + tab.dense, is_cand
