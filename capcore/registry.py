"""What every name table of capaware shares (losses, dataset formats, captioner cores): adding an entry, finding
one by the name a config gives, and importing the ``module:Class`` an entry names when it is used. A lookup that
misses imports the environment's plugins first (``capcore.plugins.knows``), so a user's names are found too."""
from __future__ import annotations

import importlib

from capcore import plugins
from capcore.errors import CapawareError


def add(table: dict, name: str, entry, kind: str):
    """Put ``entry`` under ``name`` (a second registration of one name must say the same)."""
    if table.get(name, entry) != entry:
        raise ValueError(f"{kind} {name!r} is registered already, as {table[name]}")
    table[name] = entry
    return entry


def find(table: dict, name: str, where: str, kind: str):
    """The entry of ``name``; an unknown one is one line naming ``where`` and the names there are."""
    if not plugins.knows(table, name):
        raise CapawareError(where, f"unknown {kind} {name!r}", f"use one of {', '.join(table)}")
    return table[name]


def imported(where: str) -> type:
    """The object a ``module:Name`` string names, imported now (tables stay torch-free until then)."""
    module, _, name = where.partition(":")
    return getattr(importlib.import_module(module), name)
