"""The ``discriminativeness`` section of ``eval.score_captions``' metrics JSON (Liu et al. 2018, Table 4): the
measures of ``captioners.discriminative`` on a predictions file, novelty against a Karpathy json's
training references.
"""
from __future__ import annotations

from pathlib import Path

from capcore.errors import CapawareError
from captioners.discriminative import discriminativeness
from capdata.captions import read_references


def metrics_section(preds: dict[int, str], refs_path: str | Path, fmt: str | None = None) -> dict:
    """The ``discriminativeness`` entry of eval.score_captions' metrics JSON; novelty is measured against the
    training references (train + restval) of a caption file with splits, and is None for a bare COCO captions file."""
    train, note = None, None
    try:
        refs = read_references(refs_path, "train", fmt)
        if refs.split is not None:  # a caption file with splits; a bare COCO captions file has none
            train = [c for caps in refs.refs.values() for c in caps]
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
    bad = "n/a" if section.get("bad_endings") is None else f"{section['bad_endings']:.2%}"
    return (f"  discriminativeness: unique {section['unique_captions']:.2%}, novel {novel}, bad endings {bad}, "
            f"vocabulary {section['vocab_size']} words, mean length {section['mean_length']:.2f}")
