"""Discriminativeness of generated captions (used by SCST's logs and by ``eval.score_captions``) (Liu et al. 2018,
Table 4, measured as Wang et al. 2017 do):

- ``unique_captions``: fraction of the generated captions that occur exactly once among all of them
  ("captions that are unique in all generated captions"); a templated model says the same sentence
  for many similar images and scores low;
- ``distinct_captions``: distinct captions / captions (the looser variant some papers report);
- ``novel_captions``: fraction not found, word for word, among the training references ("not seen in
  training"); None when the references file has no training split (a COCO captions_*.json);
- ``vocab_size``: distinct words used over all generated captions; ``mean_length``: words per caption;
- ``bad_endings``: fraction whose last word is the last word of no training reference ("a man riding a
  horse on a"): the truncation SacreEOS (Barraco et al. 2023) found SCST learns when the end token is
  not in its reward. An empty caption counts as a bad ending. None without training references.

Fractions, like the other caption metrics (papers print x100). Captions are compared after the same
normalisation on both sides (lower case, words only: ``simple_tokenize``), so punctuation or
case never makes a caption "novel".
"""
from __future__ import annotations

import re
from collections import Counter
from collections.abc import Iterable


def simple_tokenize(sentences: list[str]) -> list[str]:
    """Fallback without Java: lower-case words (numbers not comparable to the COCO server's)."""
    return [" ".join(re.findall(r"[a-z0-9]+(?:'[a-z]+)?", s.lower())) for s in sentences]


def _norm(captions: Iterable[str]) -> list[str]:
    return simple_tokenize(list(captions))


def discriminativeness(captions: list[str], train_captions: Iterable[str] | None = None) -> dict:
    """The metrics above for a list of generated captions (one per image)."""
    if not captions:
        raise ValueError("no captions to measure")
    norm = _norm(captions)
    counts = Counter(norm)
    words = [c.split() for c in norm]
    out = {"n_captions": len(norm),
           "unique_captions": sum(counts[c] == 1 for c in norm) / len(norm),
           "distinct_captions": len(counts) / len(norm),
           "novel_captions": None,
           "vocab_size": len({w for ws in words for w in ws}),
           "mean_length": sum(len(ws) for ws in words) / len(words)}
    out["bad_endings"] = None
    if train_captions is not None:
        train_norm = _norm(train_captions)
        seen = set(train_norm)
        out["novel_captions"] = sum(c not in seen for c in norm) / len(norm)
        endings = {c.split()[-1] for c in train_norm if c}
        out["bad_endings"] = sum(not ws or ws[-1] not in endings for ws in words) / len(words)
    return out
