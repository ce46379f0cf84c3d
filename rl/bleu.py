"""Sentence BLEU-4 as a reward term: pycocoevalcap's per-image numbers, on token ids, for a batch at once.

self-critical.pytorch can add BLEU-4 to SCST's CIDEr-D reward (``bleu_reward_weight``: its
``get_self_critical_reward`` takes the fourth row of pycocoevalcap's per-image BLEU scores, computed on
the same strings as CIDEr-D, end token included). On the embedded default a CIDEr-D-only reward raised
CIDEr-D in every seed but BLEU-4 in 5 of 12 runs (issue #26), so ``rl.reward.bleu4_weight`` exposes
that term.

What is computed is exactly ``BleuScorer.compute_score(option="closest")``'s per-image list for n = 4:
clipped n-gram matches against the maximum count over the image's references, ``guess = max(0, len - k
+ 1)``, the geometric mean over n = 1..4 with pycocoevalcap's ``tiny``/``small`` guards, and its brevity
penalty against the reference length closest to the candidate's (ties: the shorter). The n-grams come
from :func:`rl.ngrams.ngram_table` (one ``np.unique`` over candidates and references), so there is no
Python loop over captions; the tests compare with pycocoevalcap's own scorer.
"""
from __future__ import annotations

import numpy as np

from rl.ngrams import image_ngram_keys, ngram_table

N = 4
TINY, SMALL = 1e-15, 1e-9  # pycocoevalcap's guards (bleu_scorer.compute_score)


def sentence_bleu(cands: np.ndarray, cand_group: np.ndarray, refs: np.ndarray, ref_group: np.ndarray,
                  base: int, n: int = N) -> np.ndarray:
    """BLEU-n of each candidate row against the reference rows of its group -> [M] float64.

    Same arguments as :func:`rl.cider.cider_d` (token ids, 0 ends a caption; ``base`` > every id).
    """
    cands, refs = np.asarray(cands, np.int64), np.asarray(refs, np.int64)
    cand_group, ref_group = np.asarray(cand_group, np.int64), np.asarray(ref_group, np.int64)
    M = len(cands)
    if M == 0:
        return np.zeros(0)
    n_groups = int(max(cand_group.max(), ref_group.max() if len(ref_group) else 0)) + 1
    if (np.bincount(ref_group, minlength=n_groups)[cand_group] == 0).any():
        raise ValueError("every candidate needs at least one reference caption of its image")
    T = max(cands.shape[1], refs.shape[1])
    rows = np.concatenate([np.pad(cands, ((0, 0), (0, T - cands.shape[1]))),
                           np.pad(refs, ((0, 0), (0, T - refs.shape[1])))])
    tab = ngram_table(rows, base, n)
    join, is_cand = image_ngram_keys(tab, M, cand_group, ref_group)

    # the most times each (image, n-gram) occurs in one reference
    ref_join, ref_count = join[~is_cand], tab.count[~is_cand]
    by = np.argsort(ref_join, kind="stable")
    ref_join, ref_count = ref_join[by], ref_count[by]
    starts = np.flatnonzero(np.r_[True, ref_join[1:] != ref_join[:-1]]) if len(ref_join) else np.zeros(0, np.int64)
    uniq = ref_join[starts]
    max_count = np.maximum.reduceat(ref_count, starts) if len(starts) else np.zeros(0, np.int64)

    # clipped matches of each candidate, per order
    cand_e = np.flatnonzero(is_cand)
    at = np.searchsorted(uniq, join[cand_e])
    found = at < len(uniq)
    found[found] = uniq[at[found]] == join[cand_e][found]
    clipped = np.where(found, np.minimum(tab.count[cand_e], max_count[np.minimum(at, max(len(uniq) - 1, 0))]), 0)
    order = tab.order[tab.dense[cand_e]].astype(np.int64)
    correct = np.bincount(tab.row[cand_e] * n + order, weights=clipped, minlength=M * n).reshape(M, n)
    testlen = tab.lengths[:M].astype(np.float64)
    guess = np.maximum(0.0, testlen[:, None] - np.arange(n)[None, :])

    reflen = closest_ref_length(testlen, tab.lengths[M:].astype(np.float64), cand_group, ref_group, T)

    precision = np.prod((correct + TINY) / (guess + SMALL), axis=1)
    bleu = precision ** (1.0 / n)
    ratio = (testlen + TINY) / (reflen + SMALL)
    return np.where(ratio < 1, bleu * np.exp(1 - 1 / ratio), bleu)


def closest_ref_length(testlen: np.ndarray, ref_len: np.ndarray, cand_group: np.ndarray, ref_group: np.ndarray,
                       width: int) -> np.ndarray:
    """Per candidate, the length of its image's reference closest to its own; ties go to the shorter
    (pycocoevalcap: ``min((abs(l - testlen), l) for l in reflen)[1]``). ``width`` bounds every length."""
    sort = np.argsort(ref_group, kind="stable")
    g_sorted, l_sorted = ref_group[sort], ref_len[sort]
    n_refs = np.bincount(g_sorted, minlength=int(max(cand_group.max(), g_sorted.max())) + 1)
    ref_start = np.cumsum(n_refs) - n_refs
    slot = np.arange(int(n_refs.max()))[None, :]
    valid = slot < n_refs[cand_group][:, None]
    lens = np.where(valid, l_sorted[np.where(valid, ref_start[cand_group][:, None] + slot, 0)], np.inf)
    key = np.where(valid, np.abs(lens - testlen[:, None]) * (2 * (width + 2)) + lens, np.inf)
    return lens[np.arange(len(testlen)), np.argmin(key, axis=1)]
