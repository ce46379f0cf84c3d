"""A user's own losses, dataset formats and captioner cores, from outside the tree, in every stage process.

A plugin is a module that registers what it adds when it is imported (``register_loss``, ``register_format``,
``register_core``): one file, with its registration inside it. A config names it under ``plugins:`` as a module
name on the Python path (``mypkg.my_loss``) or as a ``.py`` file (relative paths from the config's folder).
``capaware run`` passes a pipeline config's plugins to every command it starts through ``CAPAWARE_PLUGINS``
(entries joined by ``os.pathsep``); every config loader imports those before it reads its config, and every
registry lookup on a name it lacks (``knows``), so a stage process knows a plugin's names before it checks them.

Why a file is imported under ``capaware_plugin_<stem>``: a registration names its class as ``module:Class``
(``f"{__name__}:MyLoss"``), and that name must mean the same module in every process that imports it again.
"""
from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path

from capcore.errors import CapawareError

ENV = "CAPAWARE_PLUGINS"


def resolve(entries, base: str | Path | None = None) -> list[str]:
    """Module names as given; ``.py`` files as absolute paths (relative ones from ``base``)."""
    out = []
    for entry in entries or ():
        entry = str(entry)
        if entry.endswith(".py"):
            path = Path(entry).expanduser()
            out.append(str((Path(base or ".") / path).resolve() if not path.is_absolute() else path))
        else:
            out.append(entry)
    return out


def import_plugins(entries, where: str) -> None:
    """Import each plugin once per process; one that cannot be imported is one line naming it and ``where``."""
    for entry in entries:
        name = f"capaware_plugin_{Path(entry).stem}" if entry.endswith(".py") else entry
        if name in sys.modules:
            continue
        try:
            if entry.endswith(".py"):
                if not Path(entry).is_file():
                    raise FileNotFoundError(entry)
                spec = importlib.util.spec_from_file_location(name, entry)
                module = importlib.util.module_from_spec(spec)
                sys.modules[name] = module
                try:
                    spec.loader.exec_module(module)
                except BaseException:
                    del sys.modules[name]
                    raise
            else:
                importlib.import_module(entry)
        except Exception as err:
            raise CapawareError(where, f"plugin {entry!r} could not be imported ({type(err).__name__}: {err})",
                                "name a module on PYTHONPATH, or a .py file (relative to the config's folder)"
                                ) from None


def knows(table: dict, name: str) -> bool:
    """Whether a registry ``table`` holds ``name``, after importing the environment's plugins on a miss: a
    command that meets a plugin's name without loading a config (a decoder, a report, a table) finds it too."""
    if name not in table:
        load()
    return name in table


def from_environment() -> list[str]:
    return [e for e in os.environ.get(ENV, "").split(os.pathsep) if e]


def load(entries=(), base: str | Path | None = None, where: str = ENV) -> list[str]:
    """Import the environment's plugins and ``entries``; add ``entries`` to the environment, so the processes
    this one starts import them too. Returns every plugin now named there."""
    import_plugins(from_environment(), ENV)
    mine = resolve(entries, base)
    import_plugins(mine, where)
    named = list(dict.fromkeys(from_environment() + mine))
    if named:
        os.environ[ENV] = os.pathsep.join(named)
    return named
