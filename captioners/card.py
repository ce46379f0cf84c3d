"""What every captioner checkpoint says about itself besides its weights, typed.

XE (captioners.xe) and SCST (rl.scst) write the same card into ``best.pt`` and ``last.pt``;
captioners.predict, eval.grounding and SCST's ``init`` read it back with :meth:`CaptionerCard.of`, which
refuses in one line a file that is not a captioner checkpoint or lacks a field, instead of failing on a
missing dictionary key somewhere later.
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from capcore.errors import CapawareError


@dataclass(frozen=True)
class CaptionerCard:
    model_args: dict  # captioners.model.Captioner's arguments (core, vocabulary size, feature sizes, widths)
    vocab: list[str]  # word of each id 1..V
    max_length: int  # words per caption in the labels
    features: str  # the feats.h5 it trained on (absolute)
    labels: str  # the labels.h5 it trained on (absolute)
    config: str  # the run's merged config, YAML
    config_hash: str
    stage: str  # "xe" | "rl"
    precision: str  # what precision: auto chose, and why
    fingerprint: str  # capcore.fingerprint.run_fingerprint of the run
    att_grid: list[int] = field(default_factory=list)  # rows, columns of the attention grid
    init: Optional[str] = None  # SCST: the XE checkpoint it started from
    init_sha256: Optional[str] = None
    scst_signature: Optional[str] = None  # SCST: rl.signature.SCSTSignature

    @property
    def core(self) -> str:
        return self.model_args["core"]

    @property
    def feature_sizes(self) -> tuple[int, int]:
        """(fc, att) feature widths the model expects."""
        return int(self.model_args["fc_feat_size"]), int(self.model_args["att_feat_size"])

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def of(cls, ckpt: dict, path: str | Path = "checkpoint") -> "CaptionerCard":
        """The card of a loaded checkpoint dict (extra keys such as weights and optimizer are ignored)."""
        if not isinstance(ckpt, dict) or "model_args" not in ckpt:
            raise CapawareError(path, "not a captioner checkpoint (no model_args)",
                                "pass the best.pt written by python -m captioners.xe or python -m rl.scst")
        names = {f.name for f in dataclasses.fields(cls)}
        required = [f.name for f in dataclasses.fields(cls)
                    if f.default is dataclasses.MISSING and f.default_factory is dataclasses.MISSING]
        missing = [n for n in required if n not in ckpt]
        if missing:
            raise CapawareError(path, f"captioner checkpoint without {', '.join(missing)} (written by an older "
                                "capaware?)", "train it again with this version")
        return cls(**{k: v for k, v in ckpt.items() if k in names})
