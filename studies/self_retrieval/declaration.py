"""The self-retrieval study's declaration (studies/self_retrieval/configs/declaration_self_retrieval.yaml, issue
#66): read, checked, stamped, and held against the kept records.

It is committed after the power plan it takes its design from (``power_plan`` on the world's val pilot) and before
any seed of the study runs. Its stamp is one sha256 over the declaration and every file that defines an arm (the
arms table, the SCST, XE, joint and feature configs, the reward and unlabeled-pool code), by the same rule as Table
1's pooled study (studies.table1_pooled.declaration.stamp_of): an edit to any of them after the declaration breaks
the stamp, and a record made under another stamp is not this study's (tests/studies/test_self_retrieval_study.py).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

from omegaconf import OmegaConf

from capcore.config import ConfigChecks, load_schema
from studies.self_retrieval.arms import ARMS
from studies.table1_pooled.declaration import declaration_stamp

ROOT = Path(__file__).resolve().parents[2]
DEFAULT = ROOT / "studies" / "self_retrieval" / "configs" / "declaration_self_retrieval.yaml"
CORES = ("att2all2", "topdown")


@dataclass
class Contrast:
    arm: str = ""
    baseline: str = ""

    def name(self) -> str:
        return f"{self.arm} − {self.baseline}"


@dataclass
class Design:
    seeds: list[int] = field(default_factory=list)  # captioner seeds: XE and every arm's SCST from it
    secondary_seeds: list[int] = field(default_factory=list)  # the seeds the secondary arms also run on
    captioners: list[str] = field(default_factory=list)
    test_images: int = 0
    val_images: int = 0
    unlabeled_images: int = 0


@dataclass
class Promise:
    """What the power plan (run on the world's val pilot, before this file) promised for the declared design."""
    effect_points: float = 0.0  # R@1 points
    power: float = 0.0
    power_upper_sd: float = 0.0
    tost_power: float = 0.0
    hours: float = 0.0  # wall on the pilot's machine, two jobs at a time
    plan: str = ""


@dataclass
class SelfRetrievalDeclaration:
    name: str = ""
    declared: str = ""
    unit: str = "captioner_seed"
    primary: Contrast = field(default_factory=Contrast)
    primary_metric: str = "self_retrieval_r1"
    co_primary_metric: str = "cider_d"
    alpha: float = 0.05
    equivalence_margin: float = 0.02
    secondary: list[Contrast] = field(default_factory=list)
    design: Design = field(default_factory=Design)
    promise: Promise = field(default_factory=Promise)
    arms: dict[str, str] = field(default_factory=dict)
    arm_files: list[str] = field(default_factory=list)

    def arms_of(self, seed: int) -> list[str]:
        """The arms a seed runs: the primary pair on every seed, the secondaries' arms on the secondary seeds."""
        named = [self.primary.baseline, self.primary.arm]
        if seed in self.design.secondary_seeds:
            named += [a for c in self.secondary for a in (c.baseline, c.arm)]
        return list(dict.fromkeys(named))


def load_declaration(path: str | Path = DEFAULT) -> SelfRetrievalDeclaration:
    cfg = load_schema(path, schema=SelfRetrievalDeclaration)
    c, d = ConfigChecks(path), cfg.design
    c.need(cfg.unit == "captioner_seed", "unit", f"{cfg.unit!r}", "unit: captioner_seed")
    c.need(len(set(d.seeds)) == len(d.seeds) >= 3, "design.seeds", f"{list(d.seeds)}: fewer than three distinct seeds",
           "declare the power plan's number of seeds")
    c.need(set(d.secondary_seeds) <= set(d.seeds), "design.secondary_seeds", "a secondary seed outside design.seeds",
           "name seeds of design.seeds")
    c.need(bool(d.captioners) and set(d.captioners) <= set(CORES), "design.captioners", f"{list(d.captioners)}",
           f"captioners of {CORES}")
    named = {a for x in (cfg.primary, *cfg.secondary) for a in (x.arm, x.baseline)}
    c.need(named <= set(ARMS), "arms", f"not arms of studies/self_retrieval/arms.py: {sorted(named - set(ARMS))}",
           f"one of {', '.join(ARMS)}")
    c.need(named <= set(cfg.arms), "arms", f"compared but not described: {sorted(named - set(cfg.arms))}",
           "describe each arm")
    c.need(0 < cfg.alpha < 1 and cfg.equivalence_margin > 0, "alpha", "not a level, or a margin not positive",
           "alpha .05, equivalence_margin .02")
    absent = [f for f in cfg.arm_files if not (ROOT / f).is_file()]
    c.need(bool(cfg.arm_files) and not absent, "arm_files", f"not files of the repository: {absent}",
           "list the files that define the arms, relative to the repository root")
    c.raise_first()
    return OmegaConf.to_object(cfg)


def stamp(decl: SelfRetrievalDeclaration, path: str | Path = DEFAULT, root: Path | None = None) -> dict:
    """What each kept record carries of the declaration it was made under (arm files read under ``root``, the
    repository by default)."""
    root = ROOT if root is None else root
    return {"declaration": str(Path(path).resolve().relative_to(root)) if Path(path).resolve().is_relative_to(root)
            else str(path), "stamp_sha256": declaration_stamp(path, root), "seeds": list(decl.design.seeds),
            "test_images": decl.design.test_images, "primary": decl.primary.name(), "alpha": decl.alpha,
            "equivalence_margin": decl.equivalence_margin}


def departures(record: dict, decl: SelfRetrievalDeclaration, path: str | Path = DEFAULT,
               root: Path | None = None) -> list[str]:
    """Every way a kept record departs from the declaration; empty when it follows it."""
    want, got = stamp(decl, path, root), record.get("declared") or {}
    return [f"{key}: record says {got.get(key)!r}, the declaration {value!r}" for key, value in want.items()
            if got.get(key) != value]
