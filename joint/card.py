"""What a joint-space checkpoint says about itself besides its weights: the features file and the vocabulary it
was trained on, so that a model is never read against other ones (``check_fits``: the rl stage's self-retrieval
reward calls it when it loads a joint model).
"""
from __future__ import annotations

import dataclasses
from dataclasses import dataclass
from pathlib import Path

from capcore.errors import CapawareError


@dataclass(frozen=True)
class JointCard:
    model_args: dict  # joint.model.JointSpace's arguments (vocab_size, feat_dim, widths, source)
    features: str  # the feats.h5 it trained on (absolute)
    features_sha256: str
    labels: str  # the labels.h5 (XE's prepro) it trained on (absolute)
    vocab: str  # its vocab.json (absolute)
    vocab_size: int  # words 1..V
    vocab_sha256: str  # sha256 of vocab.json
    loss: str  # the loss's registry name
    config: str  # the merged config, YAML
    config_hash: str
    fingerprint: str  # capcore.fingerprint.run_fingerprint of the run
    precision: str

    @property
    def feat_dim(self) -> int:
        return int(self.model_args["feat_dim"])

    def to_dict(self) -> dict:
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}

    @classmethod
    def of(cls, ckpt: dict, path: str | Path = "checkpoint") -> "JointCard":
        """The card of a loaded checkpoint dict (weights, optimizer and other keys are ignored)."""
        names = [f.name for f in dataclasses.fields(cls)]
        if not isinstance(ckpt, dict) or "model_args" not in ckpt or "vocab_sha256" not in ckpt:
            raise CapawareError(path, "not a joint-space checkpoint (no model_args / vocab_sha256)",
                                "pass the best.pt written by python -m capaware.stage joint")
        missing = [n for n in names if n not in ckpt]
        if missing:
            raise CapawareError(path, f"joint checkpoint without {', '.join(missing)}", "train it again")
        return cls(**{k: ckpt[k] for k in names})


def check_fits(card: JointCard, vocab_size: int, feat_dim: int, vocab_sha256: str | None = None,
               features: str = "the features given", where: str | Path = "joint model") -> None:
    """One CapawareError line when a joint model does not fit the vocabulary or features it is given: its
    vocabulary (size, and vocab.json's hash when ``vocab_sha256`` is given) and its feature width, each named
    beside what was given."""
    problems = []
    if int(card.vocab_size) != int(vocab_size) or (vocab_sha256 is not None and vocab_sha256 != card.vocab_sha256):
        given = f"{vocab_size} words" + (f" (vocab.json {vocab_sha256[:12]})" if vocab_sha256 else "")
        problems.append(f"vocabulary: the model's {card.vocab_size} words (vocab.json {card.vocab_sha256[:12]}, "
                        f"{card.vocab}) vs the given {given}")
    if card.feat_dim != int(feat_dim):
        problems.append(f"features: the model's {card.feat_dim}-wide ({card.features}) vs {feat_dim}-wide "
                        f"({features})")
    if problems:
        raise CapawareError(where, "joint model does not fit: " + "; ".join(problems),
                            "train the joint stage on these features and this labels.h5/vocab.json, or pass the "
                            "joint model trained on them")
