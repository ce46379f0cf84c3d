"""Typed config of a feature dump (OmegaConf structured config, loaded by capcore.config.load_schema).

Every key that changes the numbers in the file (backbone, checkpoint, input policy, grid, dtypes,
image list) is also written as an attribute of the file, so that a resumed dump can prove it is
continuing the same one; keys that only change speed (batch size, workers, device) are not.
"""
from __future__ import annotations

import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from omegaconf import OmegaConf

from capcore.config import ConfigChecks, load_schema
from capcore.fingerprint import added_later
from capdata.captions import DEFAULT as DEFAULT_FORMAT
from capdata.formats import formats_of


@dataclass
class BackboneConfig:
    checkpoint: str = "imagenet"  # imagenet | path to a capaware checkpoint (class-pretrained or stage one) |
    # oracle: each scene's ground truth from images.captions on the att_size grid (feature_extract/oracle.py)
    arch: Optional[str] = None  # imagenet: required; checkpoint: read from it (if set, must agree)
    weights: str = ""  # imagenet: local torchvision weight file (never downloaded); empty: $TORCH_HOME


@dataclass
class ImagesConfig:
    captions: str = ""  # a caption file, in images.format (a Karpathy dataset_*.json by default): its images
    karpathy: str = ""  # images.captions' old name, still read (with a one-line note): configs written before it
    format: str = added_later(default=DEFAULT_FORMAT)  # the caption file's format (capdata.captions)
    image_root: str = ""  # where the caption file's images lie; empty: the file's folder
    splits: list[str] = field(default_factory=list)  # Karpathy splits kept, in file order; empty: all
    folder: str = ""  # or: every image under this folder (recursive, sorted); ids from file names


@dataclass
class InputConfig:
    policy: str = "square"  # square: resize to size x size | short_side: keep aspect, short side = size
    size: int = 448  # square 448 -> a native 14 x 14 layer4 grid (stride 32)


@dataclass
class FeaturesConfig:
    run_dir: str = "runs/demo"  # the run folder; configs put every output under ${run_dir}
    out: str = "runs/features/feats.h5"
    device: str = "auto"  # auto | cpu | cuda
    backbone: BackboneConfig = field(default_factory=BackboneConfig)
    images: ImagesConfig = field(default_factory=ImagesConfig)
    input: InputConfig = field(default_factory=InputConfig)
    att_size: int = 14  # att grid is att_size x att_size (adaptive average pool of layer4)
    dtype: str = "float16"  # storage: float16 | float32
    compression: str = "none"  # none | gzip | lzf
    # compute: auto (feature_extract.dump.resolve_precision) | float32 | bfloat16 | float16 (GPU only)
    # (auto: bfloat16 autocast on CUDA, float16 on GPUs without native bfloat16, float32 on CPU)
    precision: str = "auto"
    batch_size: int = 16
    num_workers: int = 2  # DataLoader processes decoding and resizing images (0: in this process)
    channels_last: bool = True
    label: str = ""  # the row label tables print (a "label" attribute of the file); empty: from the backbone kind
    # (Img, Cap): set it where two files share a kind, as the attribute control (Attr) or a second Cap row (Cap2)
    skip_bad: bool = False  # record undecodable images as skipped instead of stopping
    stop_after_batches: Optional[int] = None  # testing aid: die like a kill after this many complete
    # batches, with the next batch's rows already written but not yet counted in n_done


CHOICES = {"input.policy": ("square", "short_side"), "dtype": ("float16", "float32"),
           "compression": ("none", "gzip", "lzf"), "precision": ("float32", "bfloat16", "float16", "auto"),
           "device": ("auto", "cpu", "cuda")}


def load_features_config(path: str | Path | None, overrides: list[str] = (),
                         note_renamed: bool = False) -> FeaturesConfig:
    """Load and validate; a bad value is one CapawareError naming the key and the file. ``images.karpathy`` (the
    old name) is read as ``images.captions``; ``note_renamed``: say so in one line (the dump does, once per run)."""
    cfg = load_schema(path, overrides, schema=FeaturesConfig)
    c = ConfigChecks(path, overrides)
    for key, allowed in CHOICES.items():
        c.choice(key, OmegaConf.select(cfg, key), allowed)
    for key in ("input.size", "att_size", "batch_size"):
        c.at_least(key, OmegaConf.select(cfg, key), 1)
    c.at_least("num_workers", cfg.num_workers, 0)
    c.choice("images.format", cfg.images.format, formats_of("caption"))
    old = cfg.images.karpathy  # where both are set (a config inheriting the old key, given the new), the new wins
    c.need(bool(cfg.images.captions or old) != bool(cfg.images.folder), "images", "set exactly one of "
           "images.captions and images.folder", "images.captions=PATH/dataset_coco.json or images.folder=PATH")
    c.raise_first()
    if old and note_renamed:
        print(f"note: {path or 'features config'}: images.karpathy is now images.captions (the old name still works)",
              file=sys.stderr)
    if old:  # one name carries the file from here on
        cfg.images.captions, cfg.images.karpathy = cfg.images.captions or old, ""
    return cfg
