"""Table 1's pooled study declaration (studies/table1_pooled/configs/declaration_table1_pooled.yaml, issue #56):
read, checked, stamped, and held against results.

The declaration is committed before any result it governs, after the power plan it takes its design from. Its
stamp is one sha256 over the declaration and every file that defines an arm (stage-one rows, label spaces,
the label floor, feature and captioner configs, the pipeline), so that changing any of them after the
declaration breaks the stamp (tests/studies/test_pooled_declaration.py). #46's declaration stays as it was.

Once every declared trunk is kept and the table written, the study is closed (studies/table1_pooled/closed.yaml):
the records and the table are final, the files may move and change, and the stamp is checked against the closing
commit's files in git history instead of today's.
"""
from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import yaml
from omegaconf import OmegaConf

from capcore.config import ConfigChecks, load_schema

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "studies" / "table1_pooled" / "configs" / "declaration_table1_pooled.yaml"
MODELS = ("Att2all2", "Top-Down")
TRAINING = ("XE", "RL")
CLOSED = ROOT / "studies" / "table1_pooled" / "closed.yaml"


@dataclass
class Contrast:
    features: str = ""
    baseline: str = ""

    def name(self) -> str:
        return f"{self.features} − {self.baseline}"


@dataclass
class Design:
    trunks: list[int] = field(default_factory=list)
    seeds_per_trunk: int = 1
    test_images: int = 0
    val_images: int = 0


@dataclass
class Promise:
    """What the power plan (run before the declaration) promised for the declared design."""
    effect: float = 0.03
    power: float = 0.0
    detectable: float = 0.0
    cpu_hours: float = 0.0
    plan: str = ""  # the plan's JSON, committed before this file


@dataclass
class PooledDeclaration:
    name: str = ""
    declared: str = ""
    metric: str = "CIDEr-D"
    primary: Contrast = field(default_factory=Contrast)
    pooled_over: list[list[str]] = field(default_factory=list)  # [model, training] cells
    alpha: float = 0.05
    equivalence_margin: float = 0.02
    cells_family: str = "holm"
    secondary: list[Contrast] = field(default_factory=list)
    known_effect: Contrast = field(default_factory=Contrast)
    design: Design = field(default_factory=Design)
    promise: Promise = field(default_factory=Promise)
    trunk_seed: str = ""
    captioner_seeds: str = ""
    arms: dict[str, str] = field(default_factory=dict)
    label_floor: dict[str, str] = field(default_factory=dict)
    arm_files: list[str] = field(default_factory=list)

    def captioner_seeds_of(self, trunk: int) -> list[int]:
        """The trunk's own captioner seeds, 100·trunk + r (r = 1..seeds_per_trunk): nested, never shared by two
        trunks, and never 0 (the pipeline's own seed: every run goes through studies/table1_seeds)."""
        return [100 * trunk + r for r in range(1, self.design.seeds_per_trunk + 1)]


def load_declaration(path: str | Path = DEFAULT) -> PooledDeclaration:
    cfg = load_schema(path, schema=PooledDeclaration)
    checks = ConfigChecks(path)
    checks.need(len(set(cfg.design.trunks)) >= 3, "design.trunks", f"{list(cfg.design.trunks)}: fewer than three "
                "distinct trunks", "declare the power plan's number of trunks")
    checks.need(all(0 <= t < 1000 for t in cfg.design.trunks), "design.trunks", "a trunk seed outside 0..999",
                "use trunk seeds 0..999")
    checks.need(cfg.design.seeds_per_trunk >= 1, "design.seeds_per_trunk", "no captioner seed", "at least 1")
    checks.need(0 < cfg.alpha < 1, "alpha", f"{cfg.alpha}: not a level", "a number between 0 and 1, e.g. 0.05")
    checks.need(cfg.equivalence_margin > 0, "equivalence_margin", "not positive", "e.g. 0.02")
    checks.need(cfg.cells_family == "holm", "cells_family", f"unknown rule {cfg.cells_family!r}", "holm")
    cells = {tuple(c) for c in cfg.pooled_over}
    checks.need(len(cells) == len(cfg.pooled_over) and cells <= {(m, t) for m in MODELS for t in TRAINING}
                and len(cells) > 0, "pooled_over", f"{cfg.pooled_over}: not distinct [model, training] cells",
                f"cells of {MODELS} x {TRAINING}")
    contrasts = [cfg.primary, cfg.known_effect, *cfg.secondary]
    named = {c.features for c in contrasts} | {c.baseline for c in contrasts}
    missing = sorted(named - set(cfg.arms))
    checks.need(not missing, "arms", f"compared but not described: {missing}", "describe how each arm is made")
    absent = [f for f in cfg.arm_files if not (ROOT / f).is_file()]
    checks.need(not absent and bool(cfg.arm_files), "arm_files", f"not files of the repository: {absent}",
                "list the files that define the arms, relative to the repository root")
    checks.raise_first()
    return OmegaConf.to_object(cfg)  # the dataclass itself: its methods (captioner_seeds_of, name) work


def stamp_of(declaration: bytes, read: Callable[[str], bytes]) -> str:
    """sha256 over the declaration's bytes and, in its listed order, each arm file's path and bytes (``read``)."""
    digest = hashlib.sha256(declaration)
    for name in yaml.safe_load(declaration)["arm_files"]:
        digest.update(b"\0" + name.encode() + b"\0" + read(name))
    return digest.hexdigest()


def declaration_stamp(path: str | Path = DEFAULT, root: Path = ROOT) -> str:
    """The stamp of the files as they lie now."""
    return stamp_of(Path(path).read_bytes(), lambda name: (root / name).read_bytes())


def stamp_at_commit(commit: str, declaration: str, root: Path = ROOT) -> str:
    """The stamp of the files as they were at ``commit`` (read from git history): how a closed study's stamp is
    checked once its files have moved or changed. Raises CalledProcessError where the history lacks the commit."""
    def show(name: str) -> bytes:
        return subprocess.run(["git", "-C", str(root), "show", f"{commit}:{name}"], capture_output=True,
                              check=True).stdout
    return stamp_of(show(declaration), show)


@dataclass
class Closed:
    """The study's closing: every declared trunk kept and the table written, at ``commit``, under ``stamp``. From
    then on the files may move and change (the records and the table are final), so the stamp the results carry
    is checked against the closing commit's files, not the files of today."""
    commit: str = ""
    declaration: str = ""  # the declaration's path at that commit
    stamp: str = ""


def closed(path: Path = CLOSED) -> Closed | None:
    """The study's closing record, or None while the study is open."""
    return OmegaConf.to_object(load_schema(path, schema=Closed)) if path.is_file() else None


def declared_stamp(path: str | Path = DEFAULT, root: Path = ROOT) -> str:
    """The stamp results must carry: the closing record's once the study is closed (for its own declaration), else
    the stamp of the files as they lie."""
    done = closed()
    if done is not None and Path(path).resolve() == DEFAULT.resolve():
        return done.stamp
    return declaration_stamp(path, root)


def stamp(decl: PooledDeclaration, path: str | Path = DEFAULT, root: Path = ROOT) -> dict:
    """What a results file records of the declaration it was produced under."""
    return {"declaration": str(Path(path).relative_to(root)) if Path(path).is_relative_to(root) else str(path),
            "stamp_sha256": declared_stamp(path, root), "trunks": list(decl.design.trunks),
            "seeds_per_trunk": decl.design.seeds_per_trunk, "test_images": decl.design.test_images,
            "alpha": decl.alpha, "equivalence_margin": decl.equivalence_margin,
            "primary": decl.primary.name(), "pooled_over": [list(c) for c in decl.pooled_over]}


def results_follow(results: dict, decl: PooledDeclaration, path: str | Path = DEFAULT, root: Path = ROOT) -> list[str]:
    """Every way ``results`` departs from the declaration (its stamp, or what it ran); empty when it follows."""
    want, got = stamp(decl, path, root), results.get("declared") or {}
    problems = [f"{key}: results say {got.get(key)!r}, the declaration {value!r}"
                for key, value in want.items() if got.get(key) != value]
    ran = results.get("ran") or {}
    for key in ("trunks", "test_images"):
        if key in ran and ran[key] != want[key]:
            problems.append(f"ran {key} {ran[key]!r}, declared {want[key]!r}")
    return problems
