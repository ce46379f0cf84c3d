"""A trained captioner shared as one file, ``model.capaware``: everything that turns an image into a
caption, and where it came from.

Written by ``capaware export`` (capaware/export.py), read by ``capaware caption`` and
``capaware.ImageCaptioner.load``. A captioner in a run folder depends on four other files (the backbone
checkpoint, the attributes of ``feats.h5`` that say how images became features, the vocabulary inside
``best.pt``, and the run's config); the file packs them as one ``torch.save`` archive of tensors,
strings and numbers, so ``torch.load(weights_only=True)`` opens it without running code from it.

Keys: ``format`` and ``version`` (what reads it), ``backbone`` (the trunk's tensors and ``arch``),
``preprocessing`` (``Preprocessing``: input policy and size, normalisation, layer, grid, the dtype the
features were stored in, and the compute precision of the dump), ``captioner`` (weights and its
``CaptionerCard``: architecture, vocabulary, maximum length), ``decoding`` (defaults: method, beam size)
and ``provenance`` (config hash, fingerprint, SCST signature, the features' and checkpoints' digests,
validation and test scores where the run has them).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

import torch

from capcore.checkpoint import save_checkpoint
from capcore.errors import CapawareError
from captioners.card import CaptionerCard

FORMAT = "capaware-model"
VERSION = 1  # raised whenever a reader of version N could not use the file
SUFFIX = ".capaware"
REEXPORT = "export it again with this capaware (capaware export RUN/captioners/NAME -o model.capaware)"


@dataclass(frozen=True)
class Preprocessing:
    """How an image becomes the features the captioner was trained on (stage two's file attributes)."""
    arch: str  # the trunk's backbone (embedder.backbones: a ResNet, timm:NAME, torchvision:NAME or a plugin's)
    input_policy: str  # square | short_side (feature_extract.sources.resize)
    input_size: int
    mean: tuple[float, float, float]  # per-channel normalisation after scaling to [0, 1]
    std: tuple[float, float, float]
    layer: str  # the map that is pooled: "layer4" (ResNets), "last map" (any other backbone)
    att_size: int  # attention grid side (adaptive average pool)
    feature_dtype: str  # float16 | float32: the features are rounded through it, as they were stored
    precision: str  # compute precision of the dump (auto resolves per machine at caption time)


@dataclass(frozen=True)
class ModelFile:
    backbone: dict  # {"arch": str, "state": trunk tensors}
    preprocessing: Preprocessing
    captioner_state: dict
    card: CaptionerCard
    decoding: dict  # {"method": "beam", "beam_size": int, "max_length": int}
    provenance: dict


def write_model_file(path: str | Path, model: ModelFile) -> Path:
    """One atomic file: a reader never sees half of it."""
    path = Path(path)
    save_checkpoint({"format": FORMAT, "version": VERSION, "backbone": model.backbone,
                     "preprocessing": dataclasses.asdict(model.preprocessing),
                     "captioner": {"state": model.captioner_state, "card": model.card.to_dict()},
                     "decoding": model.decoding, "provenance": model.provenance}, path)
    return path


ZIP_MAGIC = b"PK\x03\x04"


def is_text(path: Path) -> bool:
    with path.open("rb") as f:
        head = f.read(512)
    try:
        head.decode("utf-8")
    except UnicodeDecodeError as err:
        return err.start >= len(head) - 3  # a character cut at the 512th byte is still text
    return b"\x00" not in head


def read_model_file(path: str | Path) -> ModelFile:
    """The file, checked: a missing, truncated, foreign or other-version file is one CapawareError."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "model file not found", REEXPORT)
    with path.open("rb") as f:
        head = f.read(4)
    if head != ZIP_MAGIC:  # torch archives are zip files: anything else was never one, so it is not cut off
        what = "an empty file" if not head else "text" if is_text(path) else f"a file starting {head!r}"
        raise CapawareError(path, f"not a capaware model file ({what}, not a torch archive)",
                            "pass the .capaware file that capaware export writes")
    try:
        raw = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as err:  # a cut-off zip, or not a torch archive at all
        raise CapawareError(path, f"not a complete capaware model file ({type(err).__name__}: truncated or "
                            "damaged?)", "copy it again, or " + REEXPORT) from None
    if not isinstance(raw, dict) or raw.get("format") != FORMAT:
        raise CapawareError(path, "not a capaware model file (a checkpoint? pass the .capaware that "
                            "capaware export writes)", REEXPORT)
    if raw.get("version") != VERSION:
        raise CapawareError(path, f"model file version {raw.get('version')}; this capaware reads version {VERSION}",
                            f"{REEXPORT}, or caption with the capaware that wrote it "
                            f"({raw.get('provenance', {}).get('capaware_version', 'unknown')})")
    try:
        prep = Preprocessing(**{f.name: raw["preprocessing"][f.name] for f in dataclasses.fields(Preprocessing)})
        card = CaptionerCard.of(raw["captioner"]["card"], path)
        return ModelFile(raw["backbone"], prep, raw["captioner"]["state"], card, dict(raw["decoding"]),
                         dict(raw["provenance"]))
    except (KeyError, TypeError) as err:
        raise CapawareError(path, f"model file without {err}", REEXPORT) from None
