"""The joint space's losses by name: one entry each, so a new loss is one file plus one line here, as stage one's
(``embedder.losses.registry``; the table's helpers are ``capcore.registry``, shared by every table of capaware).

An entry says where the loss is (``where``: ``module:Class``, a ``joint.losses.vse.VSELoss``) and its own settings
with their defaults (``args``: the constructor's keywords; a config overrides them). Every loss takes
``(img_emb, txt_emb)``, l2-normalised with row i of each a positive pair, and returns a scalar; its ``per_item``
returns the [B] terms. This module does not import torch: a config checks a loss name against the table when it
loads, and the class is imported when it trains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from capcore import registry


@dataclass(frozen=True)
class JointLossEntry:
    name: str
    where: str
    args: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def loss_class(self) -> type:
        return registry.imported(self.where)


LOSSES: dict[str, JointLossEntry] = {}


def register_loss(name: str, where: str, args: Mapping[str, float] | None = None) -> JointLossEntry:
    """Add a loss to the table (a second registration of one name must say the same)."""
    return registry.add(LOSSES, name, JointLossEntry(name, where, MappingProxyType(dict(args or {}))), "joint loss")


def loss_entry(name: str, where: str = "joint.loss") -> JointLossEntry:
    return registry.find(LOSSES, name, where, "joint loss")


def build_loss(name: str, args: Mapping[str, float] | None = None, where: str = "joint.loss"):
    """The named loss, built with its entry's defaults overridden by ``args`` (a key it lacks is refused)."""
    entry = loss_entry(name, where)
    unknown = sorted(set(args or {}) - set(entry.args))
    if unknown:
        raise ValueError(f"{where}={name} takes {', '.join(entry.args) or 'no settings'}, not {', '.join(unknown)}")
    return entry.loss_class()(**{**entry.args, **dict(args or {})})


register_loss("vse0", "joint.losses.vse:VSE0", {"margin": 0.2})
register_loss("vse_pp", "joint.losses.vse:VSEPlusPlus", {"margin": 0.2})
register_loss("warmup", "joint.losses.warmup:WarmupVSE", {"margin": 0.2, "warmup_steps": 1000})
