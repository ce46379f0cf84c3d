"""A dataset's section of a config: which track and format, where its files are, and, for the embedded default,
how to generate it. Every stage that reads a dataset through ``capdata.formats`` reads one of these; stage one's
config (``embedder.config``) holds one for its track and one for class pretraining, and its checks of the
values live there, beside the rest of stage one's."""
from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from capcore.fingerprint import added_later, bookkeeping


@dataclass
class SynthConfig:
    """Parameters of the embedded-default generator, used when the data folder does not exist yet."""
    n_train: int = 1000
    n_test: int = 100
    seed: int = 0
    size: int = 64
    n_val: Optional[int] = None  # caption sets: val images (None: n_train / 10). Each image is drawn from its own
    # generator seeded by its index, and the splits come in blocks (train, restval, val, test): more val or test
    # images never move the train images
    # caption sets: images without captions in <root>/unlabeled/ (Liu et al.'s unlabeled pool; stage two reads the
    # folder), from generators of their own: adding them moves no captioned image
    n_unlabeled: int = added_later(default=0)


@dataclass
class DataConfig:
    track: str = "pose"  # pose | layout | caption
    # a capdata.formats row: pose_json | mpii (.mat) | mpii_json (annot/ of HRNet) | lsun | karpathy
    format: str = "pose_json"
    root: str = "data/poses"  # dataset folder
    annotation: str = ""  # annotation file, or folder for mpii_json (relative to root); empty: the format's default
    image_root: str = ""  # images folder when it is not next to the annotation (MPII)
    split_file: str = ""  # MPII .mat: image -> train|val|test (relative to root); empty: every image "train"
    input_size: int = 64  # the network's input frame (pixels); pose distances are measured in it
    layout_type: Optional[int] = 5  # LSUN layout type kept (the paper uses type 5)
    layout_labels: str = "auto"  # LSUN layout_seg ids: surfaces (relabelled copy) | regions (original) | auto
    # decode every image once into RAM (true), per batch (false), or null: into RAM when it fits (embedder.data)
    in_memory: Optional[bool] = bookkeeping(True)
    num_workers: int = bookkeeping(0)
    synthetic: Optional[SynthConfig] = None  # generate the embedded default if root is missing
