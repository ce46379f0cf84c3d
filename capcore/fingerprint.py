"""Run fingerprints: what determines a run's weights, so that a restarted run resumes only its own checkpoint.

One rule for every stage: a fingerprint is the sha256 of the config's resolved values, except the fields
its schema marks with :func:`bookkeeping` (where to write, how often to log or checkpoint, which device,
how many loader workers: nothing that changes what is computed), and the fields marked :func:`added_later` while
they hold their default. Paths are written as the run sees them,
not as the config spells them: a path inside the run folder becomes ``$RUN/<path inside it>`` and any
other path its absolute form, so ``run_dir=runs/demo`` and ``run_dir=/home/me/capaware/runs/demo`` give
the same fingerprint, and a run folder moved elsewhere still resumes.
"""
from __future__ import annotations

import dataclasses
import hashlib
import json
import os
from typing import Any

from omegaconf import DictConfig, ListConfig, OmegaConf

NOT_IN_FINGERPRINT = "not_in_fingerprint"
ONLY_WHEN_SET = "only_when_set"


def bookkeeping(default: Any = dataclasses.MISSING, *, default_factory: Any = dataclasses.MISSING) -> Any:
    """A schema field that says where or how often to write, never what is computed: left out of
    fingerprints (``dataclasses.field`` with a marker)."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={NOT_IN_FINGERPRINT: True})


def added_later(*, default: Any = dataclasses.MISSING, default_factory: Any = dataclasses.MISSING) -> Any:
    """A schema field added after runs were made, whose default computes what those runs computed: it enters
    fingerprints only when set to another value, so adding it does not make every finished run train again."""
    return dataclasses.field(default=default, default_factory=default_factory, metadata={ONLY_WHEN_SET: True})


def _unset(f: dataclasses.Field, value: Any) -> bool:
    """Is ``value`` the default of an :func:`added_later` field?"""
    if not f.metadata.get(ONLY_WHEN_SET):
        return False
    default = f.default_factory() if f.default is dataclasses.MISSING else f.default
    if dataclasses.is_dataclass(default):  # a whole section added later: unset while every field is its default
        default = dataclasses.asdict(default)
    plain = OmegaConf.to_container(value, resolve=True) if isinstance(value, (DictConfig, ListConfig)) else value
    return plain == default


def _is_path(value: str) -> bool:
    return os.sep in value or value in (".", "..")


def _where(value: str, run_dir: str | None) -> str:
    """``$RUN/...`` for a path inside the run folder, the absolute path for any other."""
    path = os.path.abspath(value)
    if run_dir is not None:
        run = os.path.abspath(run_dir)
        if path == run or path.startswith(run + os.sep):
            return "$RUN" + path[len(run):]
    return path


def _values(node: Any, run_dir: str | None) -> Any:
    """The node's resolved values without its bookkeeping fields, with paths made location-independent."""
    if isinstance(node, DictConfig):
        schema = OmegaConf.get_type(node)
        skip = set()
        if schema is not None and dataclasses.is_dataclass(schema):
            skip = {f.name for f in dataclasses.fields(schema)
                    if f.metadata.get(NOT_IN_FINGERPRINT) or (f.name in node and _unset(f, node[f.name]))}
        return {k: _values(node[k], run_dir) for k in sorted(node.keys()) if k not in skip}
    if isinstance(node, ListConfig):
        return [_values(v, run_dir) for v in node]
    if isinstance(node, str) and _is_path(node):
        return _where(node, run_dir)
    return node


def unset_added_later(node: Any, raw: Any) -> Any:
    """``raw`` (``node`` as an unresolved container) without the :func:`added_later` fields that hold their
    default, at every depth: what a config was before those fields were added."""
    if isinstance(node, DictConfig) and isinstance(raw, dict):
        schema = OmegaConf.get_type(node)
        skip = set()
        if schema is not None and dataclasses.is_dataclass(schema):
            skip = {f.name for f in dataclasses.fields(schema) if f.name in node and _unset(f, node[f.name])}
        return {k: unset_added_later(node._get_node(k), raw[k]) for k in raw if k not in skip}
    if isinstance(node, ListConfig) and isinstance(raw, list):
        return [unset_added_later(node._get_node(i), v) for i, v in enumerate(raw)]
    return raw  # a value, an interpolation left unresolved, or a section set to null


def fingerprint_values(cfg: DictConfig, run_dir: str | None = None) -> dict:
    """What the fingerprint hashes, readable (a test and a curious user can print it). ``run_dir``: the
    run folder, when ``cfg`` is a section of a config and has none of its own."""
    if run_dir is None and "run_dir" in cfg:
        run_dir = cfg.run_dir
    return _values(cfg, run_dir)


def run_fingerprint(cfg: DictConfig, extra: dict | None = None, run_dir: str | None = None) -> str:
    """16 hex digits of sha256 over :func:`fingerprint_values` plus ``extra`` (e.g. the sha256 of a file
    the run starts from, or which of a study's rows it is)."""
    values = {"config": fingerprint_values(cfg, run_dir), "extra": extra or {}}
    return hashlib.sha256(json.dumps(values, sort_keys=True, default=str).encode()).hexdigest()[:16]
