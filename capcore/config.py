"""Typed config loading that every stage shares: a YAML file and ``key=value`` overrides merged onto a
structured (dataclass) schema with OmegaConf; an unknown or mistyped key is one CapawareError line
naming the key and the file. Each stage owns its schema (``embedder.config``, ``captioners.config``,
``rl.config``, ``feature_extract.config``).
"""
from __future__ import annotations

import hashlib
from pathlib import Path
from typing import Any

from omegaconf import OmegaConf
from omegaconf.errors import OmegaConfBaseException

from capcore.errors import CapawareError


def load_config(path: str | Path | None, overrides: list[str] = (), *, schema: type) -> Any:
    """Merge a YAML file and ``key=value`` overrides onto ``schema``; errors name key and file."""
    base = OmegaConf.structured(schema)
    where = str(path) if path else "<defaults>"
    try:
        if path:
            path = Path(path)
            if not path.is_file():
                raise CapawareError(path, "config file not found", "check the path (see configs/)")
            base = OmegaConf.merge(base, OmegaConf.load(path))
        if overrides:
            where = f"{where} + command line"
            base = OmegaConf.merge(base, OmegaConf.from_dotlist(list(overrides)))
    except OmegaConfBaseException as err:
        key = getattr(err, "full_key", None) or ""
        msg = str(err).splitlines()[0]
        raise CapawareError(where, f"bad config key {key!r}: {msg}",
                            "remove or correct the key; the valid keys are the fields of "
                            f"{schema.__module__}.{schema.__name__}") from None
    return base


def to_yaml(cfg: Any) -> str:
    return OmegaConf.to_yaml(cfg)


def config_hash(cfg: Any) -> str:
    """What identifies a run's settings in fingerprints: sha256 of the sorted YAML, 16 hex digits."""
    return hashlib.sha256(OmegaConf.to_yaml(cfg, sort_keys=True).encode()).hexdigest()[:16]
