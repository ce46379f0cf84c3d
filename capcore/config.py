"""Typed config loading that every stage shares: a YAML file and ``key=value`` overrides merged onto a
structured (dataclass) schema with OmegaConf; an unknown or mistyped key is one CapawareError line
naming the key and the file. Each stage owns its schema (``embedder.config``, ``captioners.config``,
``rl.config``, ``feature_extract.config``).
"""
from __future__ import annotations

import argparse
import hashlib
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from capcore import plugins
from capcore.errors import CapawareError
from capcore.fingerprint import bookkeeping, unset_added_later

PRECISIONS = ("auto", "float32", "bfloat16")
"""A training config's ``precision`` values (capcore.device resolves them); here, without torch, so that
loading a config (capaware.pipeline_plan does it dozens of times per run) does not import torch."""


@dataclass
class RunConfig:
    """The head of every training stage's schema (stage one, captioner XE, SCST): the run's name, its
    seed, the device, the run folder that configs put every output under, and the run's own folder."""
    name: str = bookkeeping("run")
    seed: int = 0
    device: str = bookkeeping("auto")  # auto | cpu | cuda
    run_dir: str = bookkeeping("runs/demo")  # the run folder; configs put every output under ${run_dir}
    out_dir: str = bookkeeping("runs/demo/run")  # this run's own folder, inside run_dir (every config sets it)


def config_arguments(doc: str, argv: list[str] | None = None) -> tuple[str, list[str]]:
    """``--config FILE [key=value ...]``: the command line of every training entry point."""
    parser = argparse.ArgumentParser(description=doc.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    return args.config, args.overrides


def load_yaml(path: str | Path) -> Any:
    """``OmegaConf.load`` with a YAML syntax error as one line naming the file, line and column (PyYAML's own
    message spans several lines and comes with a traceback)."""
    import yaml

    try:
        return OmegaConf.load(path)
    except yaml.YAMLError as err:
        mark = getattr(err, "problem_mark", None)
        where = f"line {mark.line + 1}, column {mark.column + 1}: " if mark is not None else ""
        problem = getattr(err, "problem", None) or str(err).splitlines()[0]
        raise CapawareError(path, f"YAML syntax error at {where}{problem}",
                            "fix the YAML there (a bracket or quote left open, a missing ':', or a line indented "
                            "unlike its neighbours)") from None


def compose(path: str | Path, _seen: tuple[Path, ...] = ()) -> Any:
    """A YAML config with its ``defaults``: a list of files (relative to this one) merged first, in
    order, each with its own defaults; this file's keys then override theirs. So a variant is a base
    plus the lines that differ (configs/demo/demo_topdown.yaml is demo_att2all2.yaml plus five)."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "config file not found", "check the path (see configs/)")
    if path.resolve() in _seen:
        raise CapawareError(path, "its defaults include itself", "remove the cycle from the defaults lists")
    raw = load_yaml(path)
    bases = raw.pop("defaults", None) or []
    if isinstance(bases, str) or not all(isinstance(b, str) for b in bases):
        raise CapawareError(path, f"defaults must be a list of file names, got {bases!r}",
                            "e.g. defaults: [demo_att2all2.yaml]")
    merged = [compose(path.parent / base, (*_seen, path.resolve())) for base in bases]
    return OmegaConf.merge(*merged, raw) if merged else raw


def config_files(path: str | Path) -> list[Path]:
    """The file and every file its ``defaults`` pull in (recursively): what a run's result depends on."""
    path = Path(path)
    bases = load_yaml(path).get("defaults", None) or []
    return [path] + [f for base in bases for f in config_files(path.parent / base)]


def load_schema(path: str | Path | None, overrides: list[str] = (), *, schema: type, prepare=None) -> Any:
    """Merge a YAML file (with its ``defaults``: ``compose``) and ``key=value`` overrides onto ``schema``;
    errors name key and file. ``prepare(raw, where)``, when given, rewrites the composed file and the
    overrides before each merge (stage one expands its named method rows there)."""
    base = OmegaConf.structured(schema)
    where = str(path) if path else "<defaults>"
    plugins.load(where=where)  # a user's registrations, before this config's names are checked
    try:
        if path:
            raw = compose(path)
            if "plugins" in raw:  # a stage config's own plugins (capcore/plugins.py)
                plugins.load(list(raw.pop("plugins") or []), Path(path).parent, where)
            base = OmegaConf.merge(base, prepare(raw, where) if prepare else raw)
        if overrides:
            where = f"{where} + command line"
            extra = OmegaConf.from_dotlist(list(overrides))
            base = OmegaConf.merge(base, prepare(extra, where) if prepare else extra)
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or ""
        msg = str(err).splitlines()[0]
        raise CapawareError(where, f"bad config key {key!r}: {msg}",
                            "remove or correct the key; the valid keys are the fields of "
                            f"{schema.__module__}.{schema.__name__}") from None
    return base


class ConfigChecks:
    """A loaded config's values that no stage could use, found the same way by every stage's loader:
    each check records (key, problem, fix); :meth:`raise_first` turns the first into one CapawareError
    line naming the key and the file (and how many more there are)."""

    def __init__(self, path: str | Path | None, overrides=()):
        self.where = f"{path or '<defaults>'}{' + command line' if overrides else ''}"
        self.found: list[tuple[str, str, str]] = []

    def need(self, ok: bool, key: str, problem: str, fix: str) -> None:
        if not ok:
            self.found.append((key, problem, fix))

    def choice(self, key: str, value, options) -> None:
        self.need(value in options, key, f"unknown value {value!r}", f"use one of {', '.join(map(str, options))}")

    def at_least(self, key: str, value, low, allow_none: bool = False) -> None:
        if value is None and allow_none:
            return
        self.need(value is not None and value >= low, key, f"{value} must be >= {low}", f"set {key} >= {low}")

    def positive(self, key: str, value, allow_none: bool = False) -> None:
        if value is None and allow_none:
            return
        self.need(value is not None and value > 0, key, f"must be > 0, got {value}", "give a positive number")

    def raise_first(self) -> None:
        if self.found:
            key, problem, fix = self.found[0]
            more = f" (and {len(self.found) - 1} more)" if len(self.found) > 1 else ""
            raise CapawareError(self.where, f"{key}: {problem}{more}", fix)


def to_yaml(cfg: Any) -> str:
    return OmegaConf.to_yaml(cfg)


def config_hash(cfg: Any) -> str:
    """What identifies a run's settings in its card, its predictions and Table 1: sha256 of the sorted YAML,
    16 hex digits. Fields added to a schema later (``added_later``) count only when set, as in fingerprints,
    so a run's identifier does not change when capaware learns a setting that the run does not use."""
    plain = unset_added_later(cfg, OmegaConf.to_container(cfg, resolve=False))
    return hashlib.sha256(OmegaConf.to_yaml(OmegaConf.create(plain), sort_keys=True).encode()).hexdigest()[:16]
