"""The captioning study's declaration (studies/trunks/configs/declaration_table1.yaml, docs/declaration.md): read,
checked, and held against a study's results.

The declaration is committed before any result it governs. ``load_declaration`` validates it like any
config (one error line naming the key); ``results_follow`` says, key by key, where a results file departs
from it: the Table 1 writer stamps each results file with the settings it used, and a results file that
departs is not a result of this study (tests/studies/test_declaration.py).
"""
from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from capcore.config import ConfigChecks, load_schema

DEFAULT = Path(__file__).resolve().parent / "trunks" / "configs" / "declaration_table1.yaml"
TESTS = ("trunk_t",)
FAMILY_RULES = ("holm",)
TRAINING = ("XE", "RL")


@dataclass
class Comparison:
    features: str = ""
    baseline: str = ""
    model: Optional[str] = None  # None: every model (secondary rows)
    training: Optional[str] = None  # None: XE and RL


@dataclass
class PositiveControl:
    seeds: list[int] = field(default_factory=list)
    colour_floor: float = 0.5
    shuffled_margin: float = 0.2
    budget_chosen_on: str = "val"


@dataclass
class Declaration:
    name: str = ""
    declared: str = ""
    metric: str = "CIDEr-D"
    primary: list[Comparison] = field(default_factory=list)
    unit: str = "trunk"
    trunks: list[int] = field(default_factory=list)
    captioner_seeds: list[int] = field(default_factory=list)
    test_images: int = 0
    val_images: int = 0
    test: str = "trunk_t"
    alpha: float = 0.05
    family: str = "holm"
    secondary: list[Comparison] = field(default_factory=list)
    combined_variant: bool = True
    standardised_check: bool = True
    feature_sets: dict[str, str] = field(default_factory=dict)
    choices: dict[str, str] = field(default_factory=dict)
    positive_control: PositiveControl = field(default_factory=PositiveControl)


def load_declaration(path: str | Path = DEFAULT) -> Declaration:
    cfg = load_schema(path, schema=Declaration)
    checks = ConfigChecks(path)
    checks.need(cfg.unit == "trunk", "unit", f"{cfg.unit!r}: the unit of replication is the stage-one trunk",
                   "unit: trunk")
    checks.need(len(set(cfg.trunks)) >= 3, "trunks", f"{list(cfg.trunks)}: fewer than three distinct trunks",
                   "name three or more trunk seeds")
    checks.need(cfg.test in TESTS, "test", f"unknown test {cfg.test!r}", f"one of {TESTS}")
    checks.need(cfg.family in FAMILY_RULES, "family", f"unknown family-wise rule {cfg.family!r}",
                   f"one of {FAMILY_RULES}")
    checks.need(0 < cfg.alpha < 1, "alpha", f"{cfg.alpha}: not a level", "a number between 0 and 1, e.g. 0.05")
    checks.need(len(cfg.primary) > 0, "primary", "no primary comparison", "name Cap − Img cells")
    for i, c in enumerate(cfg.primary):
        checks.need(bool(c.model) and c.training in TRAINING and bool(c.features) and bool(c.baseline),
                       f"primary[{i}]", "a primary cell names its model, training (XE or RL), features and baseline",
                       "complete the cell")
    for i, c in enumerate(cfg.secondary):
        checks.need(bool(c.features) and bool(c.baseline), f"secondary[{i}]", "names no features or baseline",
                       "complete the row")
    names = {c.features for c in (*cfg.primary, *cfg.secondary)} | {c.baseline for c in (*cfg.primary, *cfg.secondary)}
    missing = sorted(names - set(cfg.feature_sets))
    checks.need(not missing, "feature_sets", f"compared but not described: {missing}",
                   "describe how each feature set is made")
    checks.raise_first()
    return cfg


def declaration_sha256(path: str | Path = DEFAULT) -> str:
    return hashlib.sha256(Path(path).read_bytes()).hexdigest()


def stamp(decl: Declaration, path: str | Path = DEFAULT) -> dict:
    """What a results file records of the declaration it was produced under."""
    return {"declaration": str(Path(path).name), "declaration_sha256": declaration_sha256(path),
            "trunks": list(decl.trunks), "captioner_seeds": list(decl.captioner_seeds),
            "test_images": decl.test_images, "test": decl.test, "family": decl.family, "alpha": decl.alpha,
            "primary": [[c.model, c.training, c.features, c.baseline] for c in decl.primary]}


def results_follow(results: dict, decl: Declaration, path: str | Path = DEFAULT) -> list[str]:
    """Every way ``results`` (a study results JSON, with its ``declared`` stamp and what it actually ran)
    departs from the declaration; empty when it follows it."""
    want, got = stamp(decl, path), results.get("declared") or {}
    problems = [f"{key}: results say {got.get(key)!r}, the declaration {value!r}"
                for key, value in want.items() if got.get(key) != value]
    ran = results.get("ran") or {}
    for key in ("trunks", "captioner_seeds", "test_images"):
        if key in ran and ran[key] != want[key]:
            problems.append(f"ran {key} {ran[key]!r}, declared {want[key]!r}")
    return problems
