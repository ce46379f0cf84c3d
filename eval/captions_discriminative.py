"""Discriminativeness of generated captions (Liu et al. 2018, Table 4, measured as Wang et al. 2017 do):

- ``unique_captions``: fraction of the generated captions that occur exactly once among all of them
  ("captions that are unique in all generated captions"); a templated model says the same sentence
  for many similar images and scores low;
- ``distinct_captions``: distinct captions / captions (the looser variant some papers report);
- ``novel_captions``: fraction not found, word for word, among the training references ("not seen in
  training"); None when the references file has no training split (a COCO captions_*.json);
- ``vocab_size``: distinct words used over all generated captions; ``mean_length``: words per caption.

Fractions, like the other caption metrics (papers print x100). Captions are compared after the same
normalisation on both sides (lower case, words only: eval.captions.simple_tokenize), so punctuation or
case never makes a caption "novel".
"""
from __future__ import annotations

from collections import Counter
from collections.abc import Iterable
from pathlib import Path


def _norm(captions: Iterable[str]) -> list[str]:
    from eval.captions import simple_tokenize  # imported here: eval.captions calls this module

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
    if train_captions is not None:
        seen = set(_norm(train_captions))
        out["novel_captions"] = sum(c not in seen for c in norm) / len(norm)
    return out


def metrics_section(preds: dict[int, str], refs_path: str | Path) -> dict:
    """The ``discriminativeness`` entry of eval.captions' metrics JSON; novelty is measured against the
    training references (train + restval) of a Karpathy json, and is None for any other references file."""
    from embedder.errors import CapawareError
    from eval.captions import load_refs

    train, note = None, None
    try:
        refs, kind = load_refs(refs_path, "train")
        if kind == "karpathy":
            train = [c for caps in refs.values() for c in caps]
        else:
            note = "novelty needs training references: give a Karpathy dataset_*.json as --refs"
    except CapawareError as err:
        note = f"novelty unavailable: {err.problem}"
    out = discriminativeness([preds[i] for i in sorted(preds)], train)
    out["novelty_reference"] = "Karpathy train + restval captions" if train is not None else None
    if note:
        out["note"] = note
    return out


def summary_line(section: dict) -> str:
    """One line for a CLI summary."""
    novel = "n/a" if section["novel_captions"] is None else f"{section['novel_captions']:.2%}"
    return (f"  discriminativeness: unique {section['unique_captions']:.2%}, novel {novel}, "
            f"vocabulary {section['vocab_size']} words, mean length {section['mean_length']:.2f}")
