"""The row labels of the captioning tables (Img, Cap, Oracle) by the backbone kind a features file records.

Its own module, without torch: stage three, the scores and the reports read labels from HDF5 attributes,
and importing them from ``feature_extract.backbone`` pulled in torchvision (about a second per process).
"""
from __future__ import annotations

LABELS = {"imagenet": "Img", "class-pretrained": "Img", "metric-learning": "Cap", "oracle": "Oracle"}
"""Row labels by backbone kind; feature_extract.oracle writes the "oracle" kind."""


def label_of(kind: str, label: str = "") -> str:
    """The row label of the paper's captioning tables: Img (class supervision) vs Cap (ours), Oracle (the
    scene's ground truth); ``label``, the file's own ``label`` attribute when its config set one (e.g. "Attr"
    for the attribute-supervised control, which is class-pretrained too), wins."""
    return label or LABELS.get(kind, "Custom")
