"""The captioner cores a config can name: one entry each, so a new core is one file plus one registration.

A captioner config names its core by ``model.core``; the entry says everything the rest of capaware needs to
know about it, and nothing else asks which core it is:

- ``where``: the ``module:Class`` of the core, a ``captioners.core_base.CaptionCore``;
- ``display``: its name in Table 1 and the report; the table's rows follow the registration order;
- ``fields``: the ``model.*`` settings of the shared schema that only this core reads (the Transformer's
  layers, heads and ff_size), passed to its constructor by name;
- ``args``: settings of its own that no shared field holds, with their defaults; a config sets them in
  ``model.core_args`` (as a stage-one row sets ``method.loss_args``), so a user's core needs no schema field;
- ``check``: its own config checks, ``check(cfg, checks)``, run when a config names it.

This module does not import torch (configs check ``model.core`` against it when they load; the report and
the planner read display names without a model). The core's class is imported when a captioner is built.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from types import MappingProxyType
from typing import Callable, Mapping

from capcore import plugins, registry


@dataclass(frozen=True)
class CoreEntry:
    name: str
    where: str
    display: str
    fields: tuple[str, ...] = ()
    args: Mapping[str, float] = field(default_factory=lambda: MappingProxyType({}))
    check: Callable | None = None

    def core_class(self) -> type:
        return registry.imported(self.where)


CORES: dict[str, CoreEntry] = {}


def register_core(name: str, where: str, *, display: str, fields: tuple[str, ...] = (),
                  args: Mapping[str, float] | None = None, check: Callable | None = None) -> CoreEntry:
    """Add a core to the table (a second registration of one name must say the same)."""
    entry = CoreEntry(name, where, display, tuple(fields), MappingProxyType(dict(args or {})), check)
    return registry.add(CORES, name, entry, "core")


def core_entry(name: str, where: str = "model.core") -> CoreEntry:
    return registry.find(CORES, name, where, "core")


def display_name(core: str) -> str:
    """Table 1's name of a core; an unregistered one (an old run's, or a plugin's not loaded) shows as named."""
    return CORES[core].display if plugins.knows(CORES, core) else core


def core_args(model) -> dict:
    """The settings of the core's own that ``captioners.model.Captioner`` passes to it: the shared fields it
    reads, then its own ``args`` with ``model.core_args`` over their defaults (none for the LSTM cores)."""
    entry = core_entry(model.core)
    own = {**entry.args, **dict(getattr(model, "core_args", None) or {})}
    return {**{key: model[key] for key in entry.fields}, **own}


def check_transformer(cfg, c) -> None:
    for key in ("layers", "heads", "ff_size"):
        c.at_least(f"model.{key}", cfg.model[key], 1)
    c.need(cfg.model.rnn_size % max(cfg.model.heads, 1) == 0, "model.heads",
           f"{cfg.model.rnn_size} channels (model.rnn_size) do not split into {cfg.model.heads} heads",
           "set model.heads to a divisor of model.rnn_size")
    c.need(cfg.data.max_length < 64, "data.max_length", "the Transformer knows 64 word positions",
           "set data.max_length <= 63")


register_core("att2all2", "captioners.cores:Att2all2Core", display="Att2all2")
register_core("topdown", "captioners.cores:TopDownCore", display="Top-Down")
register_core("transformer", "captioners.transformer_core:TransformerCore", display="Transformer",
              fields=("layers", "heads", "ff_size"), check=check_transformer)
