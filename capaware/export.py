"""``capaware export RUN/captioners/NAME -o model.capaware``: pack a trained captioner and the backbone
that made its features into one file (capaware/model_file.py).

What an image must go through is read from the captioner's own features file, not asked of the user:
its attributes name the backbone checkpoint (and its SHA-256), the input policy and size, the grid,
the storage dtype and the compute precision. The backbone is the file those attributes name; if its
digest no longer matches, the features were made by other weights and the export stops.
"""
from __future__ import annotations

import json
from datetime import datetime, timezone
from importlib.metadata import PackageNotFoundError, version
from pathlib import Path

from capcore.checkpoint import file_sha256, load_checkpoint
from capcore.errors import CapawareError
from capdata.captions import synthetic_note
from captioners.card import CaptionerCard
from embedder.backbones import backbone as backbone_entry
from feature_extract.backbone import load_backbone
from feature_extract.config import BackboneConfig
from feature_extract.h5io import open_features
from capaware.model_file import ModelFile, Preprocessing, write_model_file

DEFAULT_BEAM = 2  # the beam the demo's tables are scored with (eval stage)
FEATURE_KEYS = ("backbone", "backbone_method", "arch", "checkpoint", "checkpoint_sha256", "input_policy",
                "input_size", "att_size", "dtype", "precision", "n_images", "images")


def capaware_version() -> str:
    try:
        return version("capaware")
    except PackageNotFoundError:
        return "unknown"


def best_checkpoint(run: str | Path) -> Path:
    """A captioner run folder (its best.pt), a checkpoint file, or a pipeline run folder: then the
    captioner of RUN/captioners/ with the highest validation CIDEr-D (chosen on val, never on test)."""
    run = Path(run)
    if (run / "captioners").is_dir() and not (run / "best.pt").is_file():
        scored = [(float(load_checkpoint(p).get("val_cider", float("-inf"))), p)
                  for p in sorted((run / "captioners").glob("*/best.pt"))]
        if not scored:
            raise CapawareError(run / "captioners", "no trained captioner (no */best.pt)",
                                "run the pipeline's captioners stage first (capaware run CONFIG --to rl)")
        return max(scored, key=lambda s: s[0])[1]
    path = run / "best.pt" if run.is_dir() else run
    if not path.is_file():
        raise CapawareError(path, "no trained captioner here", "pass RUN/captioners/NAME of a finished "
                            "captioners.xe or rl.scst run (it holds best.pt), or the pipeline's RUN")
    return path


def feature_attrs(card: CaptionerCard, ckpt_path: Path) -> dict:
    """The attributes of the features the captioner trained on; refused if another toolkit wrote them."""
    with open_features(card.features) as f:
        attrs = f.attrs
    if "checkpoint_sha256" not in attrs or "input_size" not in attrs:
        raise CapawareError(card.features, "features without stage two's attributes (written by another "
                            "toolkit?): how images became them is unknown", "export a captioner trained on "
                            "features from python -m feature_extract")
    return attrs


def backbone_file(recorded: str, features: str) -> Path:
    """The backbone checkpoint a features file names: as recorded, or, when the dump ran in another
    folder (pipeline paths are relative to where it ran), under a folder above the features file."""
    path = Path(recorded)
    if path.is_file() or path.is_absolute():
        return path
    found = next((base / path for base in Path(features).resolve().parents if (base / path).is_file()), None)
    return found or path


def backbone_of(attrs: dict, features: str) -> tuple[dict, str, tuple]:
    """(the trunk's tensors and arch, the weight file's digest, the (mean, std) its input was normalised with),
    checked against the features file. Any backbone of the table: a ResNet's trunk, or a timm, torchvision or
    plugin network as stage two loaded it (its own weight file, its own normalisation)."""
    if attrs["backbone"] in ("imagenet", "pretrained"):  # a weight file of the backbone's own, not a checkpoint
        cfg = BackboneConfig(checkpoint="imagenet", arch=attrs["arch"],
                             weights=str(backbone_file(attrs["checkpoint"], features)))
    else:
        where = backbone_file(attrs["checkpoint"], features)
        cfg = BackboneConfig(checkpoint=str(where), arch=attrs["arch"])
        digest = file_sha256(where) if where.is_file() else None
        if digest is not None and digest != attrs["checkpoint_sha256"]:
            raise CapawareError(attrs["checkpoint"], f"is not the backbone that made {features} (its SHA-256 "
                                "changed since the dump)", "dump the features again and retrain, or restore "
                                "the checkpoint the features were made with")
    model, info = load_backbone(cfg)
    trunk = getattr(model, "trunk", model)  # an Embedder's trunk, or the library network stage two read alone
    return {"arch": info.arch, "state": trunk.state_dict()}, info.checkpoint_sha256, model.norm


def scores_of(run_dir: Path) -> dict:
    """The run's own scores: eval.score_captions' metrics_<split>.json and eval.grounding's grounding_<split>.json."""
    found = {}
    for path in sorted(run_dir.glob("metrics_*.json")) + sorted(run_dir.glob("grounding_*.json")):
        data = json.loads(path.read_text())
        data = data.get("metrics", data)
        found[path.stem] = {k: v for k, v in data.items() if isinstance(v, (int, float)) and not isinstance(v, bool)}
    return found


def trained_on(images) -> dict:
    """{"synthetic_data": what it is} when the captions the features came from are a synthetic set that says so
    (the embedded default's json does): ``capaware caption`` then tells its user what the model can name."""
    note = synthetic_note(images)
    return {"synthetic_data": note} if note else {}


def export(run: str | Path, out: str | Path, beam_size: int = DEFAULT_BEAM) -> Path:
    """Write ``out`` (one file) from a captioner run; returns its path."""
    path = best_checkpoint(run)
    ckpt = load_checkpoint(path)
    card = CaptionerCard.of(ckpt, path)
    attrs = feature_attrs(card, path)
    backbone, digest, (mean, std) = backbone_of(attrs, card.features)
    layer = "layer4" if backbone_entry(backbone["arch"]).family == "resnet" else "last map"
    prep = Preprocessing(arch=backbone["arch"], input_policy=str(attrs["input_policy"]),
                         input_size=int(attrs["input_size"]), mean=tuple(map(float, mean)),
                         std=tuple(map(float, std)), layer=layer, att_size=int(attrs["att_size"]),
                         feature_dtype=str(attrs["dtype"]), precision=str(attrs["precision"]))
    provenance = {"capaware_version": capaware_version(),
                  "exported": datetime.now(timezone.utc).isoformat(timespec="seconds"),
                  "checkpoint": str(path.resolve()), "checkpoint_sha256": file_sha256(path),
                  "backbone_sha256": digest, "features": {k: attrs[k] for k in FEATURE_KEYS if k in attrs},
                  "val_cider": float(ckpt.get("val_cider", float("nan"))), "epoch": int(ckpt.get("epoch", -1)),
                  "scores": scores_of(path.parent), **trained_on(attrs.get("images"))}
    decoding = {"method": "beam" if beam_size > 1 else "greedy", "beam_size": int(beam_size),
                "max_length": int(card.max_length)}
    model = ModelFile(backbone, prep, ckpt["model"], card, decoding, provenance)
    return write_model_file(out, model)
