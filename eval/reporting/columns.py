"""The one table of what the captioning tables show: each metric's key, name, digits and legend, and each
feature and training row's label, order and meaning. Table 1 (results_table), the report's captioning section
(caption_sections) and the seeds table (results_seeds) all print from here, so a new metric is two places:
the code that computes it and one line below.
"""
from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Column:
    key: str  # the column's head in the tables
    name: str  # the metric's own name (the metrics file's key for the scores)
    digits: int  # as Table 1 prints it
    legend: str  # what the legend says of it, after "KEY: " ("KEY NAME" for a score)


SCORES = (Column("B4", "BLEU-4", 4, "BLEU-4"), Column("C", "CIDEr-D", 3, "CIDEr-D"),
          Column("M", "METEOR", 4, "METEOR"), Column("R", "ROUGE-L", 4, "ROUGE-L"), Column("S", "SPICE", 4, "SPICE"))
"""pycocoevalcap's scores, fractions as the paper prints them."""

BESIDE = (
    Column("G", "CIDEr-D real / shuffled features", 2,
           "CIDEr-D with each image's own features / with the features shuffled across images (greedy, "
           "eval.grounding; about 1 when the captions ignore the image)"),
    Column("D", "distinct captions / images", 2, "distinct captions / images"),
    Column("E", "bad endings: captions whose last word ends no training reference", 2,
           "bad endings, captions whose last word ends no training reference"))
"""What the captions do beyond the scores (captioners/discriminative.py, eval/grounding.py)."""


TEXT_SIDE = (
    Column("U", "unique captions", 2, "captions written for one test image only (Liu et al. 2018, Table 4)"),
    Column("N", "novel captions", 2, "captions found in no training reference"),
    Column("SR1", "self-retrieval R@1", 1,
           "self-retrieval R@1 / 5 / 10 in percent: each test image's caption, as a query in the joint space of its "
           "features, finds its own image among all test images within the first 1 / 5 / 10 (eval.self_retrieval; "
           "chance R@1 = 100 / images)"),
    Column("SR5", "self-retrieval R@5", 1, ""), Column("SR10", "self-retrieval R@10", 1, ""))
"""What the text side adds (issue #66), shown when a row has a self-retrieval record (a joint stage ran)."""


@dataclass(frozen=True)
class Row:
    label: str
    legend: str = ""  # said in the legend when not empty


FEATURES = (Row("Img", "class-supervised backbone (ImageNet / class-pretrained)"),
            Row("Cap", "caption-aware (metric learning)"), Row("Cap2"), Row("Attr"), Row("Oracle"), Row("Custom"))
"""Feature rows in Table 1's order; the first is the baseline every paired difference is taken against."""
BASELINE = FEATURES[0].label

TRAINING = (Row("XE", "cross-entropy"), Row("RL", "self-critical fine-tuning"),
            Row("RL+SR", "self-critical with the self-retrieval reward (Liu et al. 2018; +SelfRet in its signature)"))

SIGNATURE = ("SCST signature: EOS in the reward (Standard) or not (No<Eos>), baseline (average of the other "
             "samples or greedy) with samples per image, document-frequency corpus, XE weight, temperature "
             "(rl/signature.py).")


def digits(key: str) -> int:
    return next((c.digits for c in (*SCORES, *BESIDE, *TEXT_SIDE) if c.key == key), 2)


def order(rows: tuple[Row, ...]) -> list[str]:
    return [r.label for r in rows]


def legend(scores: tuple[Column, ...] = SCORES, signature: bool = True, text_side: bool = False) -> str:
    """The legend under a captioning table: its scores, the feature and training rows, the columns beside (and
    the text side's, when the table shows them)."""
    beside = (*BESIDE, *TEXT_SIDE) if text_side else BESIDE
    parts = [", ".join(f"{c.key} {c.legend}" for c in scores) + " (fractions, as in the paper).",
             "; ".join(f"{r.label}: {r.legend}" for r in FEATURES if r.legend) + ".",
             "; ".join(f"{r.label}: {r.legend}" for r in TRAINING) + ".",
             "; ".join(f"{c.key}: {c.legend}" for c in beside if c.legend) + "."]
    return " ".join(parts + ([SIGNATURE] if signature else []))
