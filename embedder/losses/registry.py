"""The stage-one losses a row can name: one entry each, so a new loss is one file plus one line here.

A row (``embedder.config.MethodConfig``) names its loss by ``method.loss``; the entry says everything
the rest of stage one needs to know about it, and nothing else asks which loss it is:

- ``where``: the ``module:Class`` of the loss, an ``embedder.losses.base.RowLoss``;
- ``normalised``: it trains L2-normalised embeddings, so retrieval ranks by normalised ones too;
- ``mined``: it takes the triplets that ``method.mining`` (dense | binary) selects from ``embedder.mining``;
  the others see every pair of the batch (log-ratio, Rank-N-Contrast) or sample their own (margin);
- ``fields``: the ``MethodConfig`` settings it reads, beside ``loss`` (and ``mining`` when mined); the config
  check holds these to values the loss can use, and leaves the others alone;
- ``args``: settings of its own that no other loss shares, with their defaults; a row sets them in
  ``method.loss_args``, so a new loss needs no field in the shared ``MethodConfig``.

This module does not import torch: configs check ``method.loss`` against this table when they load, and
loading a config stays cheap (the pipeline planner loads every stage's config between stages). The loss's
class is imported when a row trains.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Mapping

from capcore import registry


@dataclass(frozen=True)
class LossEntry:
    name: str
    where: str
    normalised: bool
    mined: bool
    fields: tuple[str, ...] = ()
    args: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))

    def loss_class(self) -> type:
        return registry.imported(self.where)


LOSSES: dict[str, LossEntry] = {}


def register_loss(name: str, where: str, *, normalised: bool, mined: bool, fields: tuple[str, ...] = (),
                  args: Mapping[str, float] | None = None) -> LossEntry:
    """Add a loss to the table (a second registration of one name must say the same)."""
    entry = LossEntry(name, where, normalised, mined, tuple(fields), MappingProxyType(dict(args or {})))
    return registry.add(LOSSES, name, entry, "loss")


def loss_entry(name: str, where: str = "method.loss") -> LossEntry:
    return registry.find(LOSSES, name, where, "loss")


def loss_args(method) -> dict[str, float]:
    """The row's own settings of its loss: the entry's defaults, then ``method.loss_args`` (whose keys the
    config check has held to the entry's)."""
    return {**loss_entry(method.loss).args, **dict(getattr(method, "loss_args", None) or {})}


register_loss("log_ratio", "embedder.losses.log_ratio:LogRatioLoss", normalised=False, mined=False,
              fields=("distance",))
register_loss("triplet", "embedder.losses.triplet:TripletLoss", normalised=True, mined=True, fields=("margin",))
register_loss("margin", "embedder.losses.margin:MarginRowLoss", normalised=True, mined=False, fields=("margin",))
register_loss("rank_n_contrast", "embedder.losses.rank_n_contrast:RankNContrastLoss", normalised=False, mined=False,
              fields=("temperature",))
register_loss("g17_hinge", "embedder.losses.g17:G17Loss", normalised=True, mined=False, fields=("margin",),
              args={"per_pair": 100})  # Gordo & Larlus 2017, Eq. 1; relevance: the k = train.positives nearest
