"""The reference for rl/cider.py: pycocoevalcap's own CiderScorer run with fixed (training-set) document
frequencies, plus the conversions into its string form. Slow, and only for checking and timing: the
tests (tests/rl/test_rl_cider.py, tests/rl/test_rl_bleu.py) and benchmarks/bench_scst.py import it.

It lives here, not in the ``rl`` package, because production code must not carry a test shim, and not in
tests/ because a benchmark should not import from the test suite. ``benchmarks/`` is no installed
package (pyproject's setuptools ``include`` lists only the production packages) but it is importable as
the namespace package ``benchmarks`` from the repository root: the tests run with ``pythonpath = ["."]``
(pyproject) and bench_scst.py puts the repository root on ``sys.path``, so both write
``from benchmarks.cider_reference import ...``.
"""
from __future__ import annotations

import numpy as np
from pycocoevalcap.cider.cider_scorer import CiderScorer

from rl.cider import N, SIGMA, DocFreq
from rl.ngrams import decode_key


def ids_to_string(seq, eos: bool = False) -> str:
    """Token ids -> the space-separated string pycocoevalcap reads. It stops at the first 0, which is
    kept as the word "0" with ``eos`` (self-critical.pytorch's array_to_str)."""
    words = []
    for t in seq:
        if int(t) == 0:
            if eos:
                words.append("0")
            break
        words.append(str(int(t)))
    return " ".join(words)


def doc_freq_as_ngrams(df: DocFreq) -> dict[tuple[str, ...], float]:
    """Our document frequencies in pycocoevalcap's form: {("12", "7"): 3.0, ...}; the end token is "0"."""
    def word(w: int) -> str:
        return "0" if w == df.end_token else str(w)

    return {tuple(word(w) for w in decode_key(k, df.base)): float(c) for k, c in zip(df.keys.tolist(), df.counts)}


class _CorpusSized(list):
    """The batch's references, but ``len()`` answers the corpus size: pycocoevalcap sets
    ``ref_len = log(len(crefs))`` inside compute_cider, and iterates the list itself (zip)."""

    def __init__(self, items, n_docs: int):
        super().__init__(items)
        self.n_docs = n_docs

    def __len__(self) -> int:
        return self.n_docs


class FrozenDocFreq(dict):
    """Read-only document frequencies: a missing n-gram reads 0 without being inserted."""

    def __missing__(self, key):
        return 0.0


def fixed_df_scorer(document_frequency: dict, n_docs: int, sigma: float = SIGMA):
    """pycocoevalcap's CiderScorer whose document frequencies and ref_len are given, not counted on the
    batch. Only the two corpus hooks are replaced; cooking, tf-idf, clipping and penalty are its own."""
    frozen = document_frequency if isinstance(document_frequency, FrozenDocFreq) else FrozenDocFreq(document_frequency)

    class FixedDfCiderScorer(CiderScorer):
        def compute_doc_freq(self):
            self.document_frequency = frozen

        def compute_score(self, option=None, verbose=0):
            self.compute_doc_freq()
            self.crefs = _CorpusSized(self.crefs, n_docs)
            scores = np.array(self.compute_cider())
            return float(np.mean(scores)), scores

    return FixedDfCiderScorer(n=N, sigma=sigma)


def reference_cider_d(cands: list[str], refs: list[list[str]], document_frequency: dict, n_docs: int,
                      sigma: float = SIGMA) -> np.ndarray:
    """CIDEr-D of caption strings by pycocoevalcap itself, with the given corpus document frequencies."""
    scorer = fixed_df_scorer(document_frequency, n_docs, sigma)
    for cand, ref in zip(cands, refs):
        scorer += (cand, ref)
    return scorer.compute_score()[1]
