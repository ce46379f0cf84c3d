"""The self-retrieval study's tables and verdict, from the kept records alone: ``python -m
studies.self_retrieval.study_table [--records DIR] [--out DIR]``.

Every number is recomputed from each run's per-image values (R@K from the rank of each caption's own image among
the 1,000 test images, CIDEr-D as the mean of the images' CIDEr-D, which is what pycocoevalcap's corpus CIDEr-D is),
so the table depends on nothing but docs/study_results/self_retrieval/seed_*.json. A record made under another
declaration stamp is refused, naming it.

- **Primary**: SR-FL − SCST in self-retrieval R@1, one value per captioner seed (averaged over the two captioners),
  the two-sided one-sample t on seeds − 1 df, with the exact sign-flip p beside it.
- **Co-primary**: the same contrast in CIDEr-D, by TOST at the declared margin (studies.table1_pooled.pooled_stats).
- **The one joint claim** ("more discriminative at no cost in fidelity") needs both to reject at alpha: an
  intersection-union test, which holds its level without a correction.
- **Secondary** contrasts: numbers only (mean, sd, 95% interval over the secondary seeds), no verdict words.
- Two layouts of the paper: Table 4 (per arm and captioner: BLEU-4, CIDEr-D, R@1/5/10, unique, novel) and Table 3
  (the ablations, averaged over the captioners).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from studies.provenance import with_commit
from studies.self_retrieval.arms import LABELS
from studies.self_retrieval.declaration import DEFAULT, departures, load_declaration
from studies.self_retrieval.run_study import RECORDS
from studies.table1_pooled.pooled_stats import sign_flip_p, tost, trunk_t, verdict


def recall_at(ranks, k: int) -> float:
    return 100.0 * float(np.mean(np.asarray(ranks) < k))


def run_values(run: dict) -> dict:
    """One run's numbers from its per-image values (and BLEU-4 and the caption counts from its metrics)."""
    ranks = run["rank_per_image"]
    return {"r1": recall_at(ranks, 1), "r5": recall_at(ranks, 5), "r10": recall_at(ranks, 10),
            "cider_d": float(np.mean(run["cider_d_per_image"])), "bleu4": run["metrics"]["BLEU-4"],
            "unique": run["unique"], "novel": run["novel"]}


def load_records(folder: Path, decl, declaration: Path) -> list[dict]:
    records = [json.loads(p.read_text()) for p in sorted(folder.glob("seed_*.json"))]
    for r in records:
        problems = departures(r, decl, declaration)
        if problems:
            raise CapawareError(folder / f"seed_{r['seed']}.json", f"not made under this declaration: {problems[0]}",
                                "a record of another declaration belongs to another study")
    return records


def contrast(records: list[dict], arm: str, base: str, key: str, cores: list[str]) -> np.ndarray:
    """Per seed that ran both arms: arm − base of ``key``, averaged over the captioners."""
    return np.array([np.mean([run_values(r["runs"][arm][c])[key] - run_values(r["runs"][base][c])[key]
                              for c in cores]) for r in records if arm in r["runs"] and base in r["runs"]])


def tests(records: list[dict], decl) -> dict:
    cores, p = decl.design.captioners, decl.primary
    r1 = contrast(records, p.arm, p.baseline, "r1", cores)
    cider = contrast(records, p.arm, p.baseline, "cider_d", cores)
    primary, co = trunk_t(r1, decl.alpha), trunk_t(cider, decl.alpha)
    equivalence = tost(cider, decl.equivalence_margin, decl.alpha)
    primary["sign_flip_p"] = sign_flip_p(r1) if len(r1) <= 20 else None
    better = primary["p"] < decl.alpha and primary["mean"] > 0
    words = {
        "primary": (f"{LABELS[p.arm]} finds its own image {'more' if primary['mean'] > 0 else 'less'} often than "
                    f"{LABELS[p.baseline]}: R@1 {primary['mean']:+.2f} points [{primary['low']:+.2f}, "
                    f"{primary['high']:+.2f}], p {primary['p']:.3g}" if primary["p"] < decl.alpha else
                    f"no difference in R@1 detected: {primary['mean']:+.2f} points [{primary['low']:+.2f}, "
                    f"{primary['high']:+.2f}], p {primary['p']:.3g} (not evidence of no difference)"),
        "co_primary": "CIDEr-D, " + verdict(co, equivalence, decl.alpha),
        "joint": ("more discriminative at no cost in CIDEr-D beyond the margin (both tests reject)"
                  if better and equivalence["equivalent"] else "the joint claim is not shown (it needs both)")}
    secondary = {c.name(): trunk_t(v, decl.alpha) if len(v) > 1 else {"values": v.tolist()}
                 for c in decl.secondary for v in [contrast(records, c.arm, c.baseline, "r1", cores)]}
    secondary_cider = {c.name(): contrast(records, c.arm, c.baseline, "cider_d", cores).tolist()
                       for c in decl.secondary}
    return {"seeds": [r["seed"] for r in records], "primary": primary, "co_primary": co, "tost": equivalence,
            "words": words, "secondary_r1": secondary, "secondary_cider_d": secondary_cider}


def mean_sd(values: list[float], digits: int) -> str:
    v = np.asarray([x for x in values if x is not None], dtype=np.float64)
    if len(v) == 0:
        return ""
    return f"{v.mean():.{digits}f}" + (f" ± {v.std(ddof=1):.{digits}f}" if len(v) > 1 else "")


COLUMNS = (("bleu4", "BLEU-4", 3, 1), ("cider_d", "CIDEr-D", 3, 1), ("r1", "R@1", 1, 1), ("r5", "R@5", 1, 1),
           ("r10", "R@10", 1, 1), ("unique", "unique %", 1, 100), ("novel", "novel %", 1, 100))


def table4(records: list[dict], decl) -> list[str]:
    lines = ["| arm | captioner | seeds | " + " | ".join(c[1] for c in COLUMNS) + " |",
             "|---|---|---:|" + "---:|" * len(COLUMNS)]
    arms = list(dict.fromkeys(a for r in records for a in r["runs"]))
    for arm in arms:
        for core in decl.design.captioners:
            vals = [run_values(r["runs"][arm][core]) for r in records if arm in r["runs"]]
            cells = [mean_sd([None if v[k] is None else v[k] * scale for v in vals], d) for k, _, d, scale in COLUMNS]
            lines.append(f"| {LABELS[arm]} | {core} | {len(vals)} | " + " | ".join(cells) + " |")
    return lines


def table3(records: list[dict], decl) -> list[str]:
    """The ablations over the secondary seeds (every arm they ran), each value the mean over the captioners."""
    sub = [r for r in records if r["seed"] in decl.design.secondary_seeds]
    arms = list(dict.fromkeys(a for r in sub for a in r["runs"]))
    lines = ["| setting | seeds | CIDEr-D | R@1 | R@5 | R@10 |", "|---|---:|---:|---:|---:|---:|"]
    for arm in arms:
        per_seed = [{k: np.mean([run_values(r["runs"][arm][c])[k] for c in decl.design.captioners])
                     for k in ("cider_d", "r1", "r5", "r10")} for r in sub if arm in r["runs"]]
        lines.append(f"| {LABELS[arm]} | {len(per_seed)} | {mean_sd([s['cider_d'] for s in per_seed], 3)} | "
                     + " | ".join(mean_sd([s[k] for s in per_seed], 1) for k in ("r1", "r5", "r10")) + " |")
    return lines


def markdown(records: list[dict], decl, result: dict) -> str:
    machines = sorted({r["machine"] for r in records})
    w = result["words"]
    return "\n".join([
        f"## Self-retrieval study ({len(records)} of {len(decl.design.seeds)} declared seeds kept; "
        f"{decl.design.test_images} test images)", "", f"Machines: {'; '.join(machines)}.", "",
        "**Primary** (R@1): " + w["primary"] + ".", "", "**Co-primary** (CIDEr-D): " + w["co_primary"] + ".", "",
        "**Both:** " + w["joint"] + ".", "", "### Table 4 layout (test; mean ± sd over seeds)", "",
        *table4(records, decl), "", "### Table 3 layout (ablations; secondary seeds, mean over the captioners; "
        "numbers only)", "", *table3(records, decl), ""])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--declaration", default=str(DEFAULT))
    parser.add_argument("--records", default=str(RECORDS))
    parser.add_argument("--out", default=None, help="where the table goes [the records' folder]")
    a = parser.parse_args(argv)
    decl, folder = load_declaration(a.declaration), Path(a.records)
    records = load_records(folder, decl, Path(a.declaration))
    if len(records) < 2:
        raise CapawareError(folder, f"{len(records)} seed(s) kept", "run python -m studies.self_retrieval.run_study")
    result = tests(records, decl)
    if len(records) < len(decl.design.seeds):  # the numbers so far, and no words: the verdict waits for every seed
        result["words"] = {k: "withheld until every declared seed is kept (interim)" for k in result["words"]}
    out = Path(a.out) if a.out else folder
    text = markdown(records, decl, result)
    if len(records) < len(decl.design.seeds):
        text = text.replace("## Self-retrieval study", "## Self-retrieval study, INTERIM (no verdict until every "
                            "declared seed is kept)", 1)
    write_text(out / "study_table.md", text)
    write_text(out / "study_table.json", json.dumps(with_commit({**result, "complete": len(records) == len(
        decl.design.seeds)}), indent=1))
    print(text + f"\n-> {out}/study_table.{{md,json}}")


if __name__ == "__main__":
    run_cli(main)
