"""Table 1's pooled study, under its declaration: ``python -m studies.table1_pooled.pooled_table [--records DIR]
[--out DIR]`` (studies/table1_pooled/study_pooled.sh runs it once every declared trunk is kept).

It reads the kept trunk records (studies.table1_pooled.trunk_record: ``docs/study_results/table1_pooled/
trunk_<T>.npz``, each run's CIDEr-D and per-image CIDEr-D), so the table is rebuilt from the repository alone, on
any machine, whichever machines ran the trunks. Written to DIR (default: the records' folder):

- ``table1_pooled.json``: the primary pooled contrast (its test, TOST, verdict, the plan's promise, and the
  detectable effect at the declared alpha from the observed spread), the known-effect check, the four cells
  (Holm, intervals) and the secondary pooled contrasts (numbers and intervals only), with every trunk's machine;
  beside every t-test's p, the exact sign-flip p of the same trunk values (``sign_flip_p``: added after the close,
  issue #65, as the TOST and scale columns were; it changes no other number and no verdict word);
- ``table1_pooled.md``: the same as tables, with the verdict words the primary test and TOST allow and no others.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import asdict
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from studies.table1_pooled.declaration import (DEFAULT, MODELS, ROOT, TRAINING, Contrast, declared_stamp,
                                               load_declaration, stamp)
from studies.table1_pooled.pooled_stats import pooled_values, sign_flip_p, tost, trunk_t, verdict
from studies.table1_pooled.power_plan import detectable
from studies.table1_pooled.trunk_record import RECORDS, TrunkRecord, read_record
from studies.trunks.trunk_stats import components, holm


def collect(records: Path, decl, declaration: Path = DEFAULT) -> list[TrunkRecord]:
    """Every declared trunk's record, checked against the declaration (its stamp, seeds, arms, image count)."""
    want, out = declared_stamp(declaration), []
    for t in decl.design.trunks:
        path = records / f"trunk_{t}.npz"
        if not path.is_file():
            raise CapawareError(path, f"trunk {t} is not kept yet",
                                f"run bash studies/table1_pooled/study_pooled.sh RUN {t} (it resumes)")
        record = read_record(path)
        if record.seeds != decl.captioner_seeds_of(t) or record.arms != list(decl.arms):
            raise CapawareError(path, f"seeds {record.seeds} / arms {record.arms} are not the declaration's",
                                "rerun the trunk under this declaration")
        if record.stamp != want:
            raise CapawareError(path, f"ran under stamp {record.stamp[:12] or 'none'}, not the declaration's "
                                f"{want[:12]}", "rerun the trunk under this declaration")
        out.append(record)
    if len({len(r.image_ids) for r in out}) != 1 or any(not np.array_equal(r.image_ids, out[0].image_ids) for r in out):
        raise CapawareError(records, "the trunks were scored on different test images",
                            "rerun them on the declared set")
    return out


def cell_diffs(records: list[TrunkRecord], contrast: Contrast, model: str, training: str) -> np.ndarray:
    """[trunks, seeds] of the contrast's CIDEr-D difference (the runs' own scores, as Table 1 prints them)."""
    a, b = records[0].arms.index(contrast.features), records[0].arms.index(contrast.baseline)
    m, t = MODELS.index(model), TRAINING.index(training)
    return np.array([r.scores[:, a, m, t] - r.scores[:, b, m, t] for r in records])


def pooled(records, decl, contrast: Contrast) -> dict:
    """A pooled contrast's trunk-level test, TOST and verdict words, and its detectable effect."""
    cells = [cell_diffs(records, contrast, m, t) for m, t in decl.pooled_over]  # each [trunks, seeds]
    values, runs = pooled_values(cells), np.mean(cells, axis=0)  # per trunk; per run over the four cells
    test = trunk_t(values, decl.alpha)
    equivalence = tost(values, decl.equivalence_margin, decl.alpha)
    spread = float(np.var(values, ddof=1))
    return {"contrast": contrast.name(), **test, "sign_flip_p": sign_flip_p(values), "tost": equivalence,
            "verdict": verdict(test, equivalence, decl.alpha),
            "detectable": detectable(spread, len(values), decl.alpha) if spread > 0 else 0.0,
            "runs": runs.tolist(), "components": asdict(components(runs.tolist()))}


def cells(records, decl) -> list[dict]:
    """The primary contrast's four cells, secondary: each with its own test and interval, Holm over the four."""
    values = [cell_diffs(records, decl.primary, m, t).mean(axis=1) for m, t in decl.pooled_over]
    out = [{"model": m, "training": t, **trunk_t(v, decl.alpha), "sign_flip_p": sign_flip_p(v)}
           for (m, t), v in zip(decl.pooled_over, values)]
    rejected, adjusted = holm([c["p"] for c in out], decl.alpha)
    for c, r, a in zip(out, rejected, adjusted):
        c.update(holm_p=a, holm_rejects=r)
    return out


def analyse(records: list[TrunkRecord], decl, declaration: Path) -> dict:
    plan = json.loads((ROOT / decl.promise.plan).read_text()) if decl.promise.plan else None
    return {"declared": stamp(decl, declaration),
            "ran": {"trunks": [r.trunk for r in records], "test_images": len(records[0].image_ids),
                    "captioner_seeds": {r.trunk: r.seeds for r in records},
                    "machines": {r.trunk: f"{r.machine}; {r.seconds:.0f} s" for r in records}},
            "primary": pooled(records, decl, decl.primary), "promise": asdict(decl.promise), "plan": plan,
            "known_effect": pooled(records, decl, decl.known_effect), "cells": cells(records, decl),
            "secondary": [pooled(records, decl, c) for c in decl.secondary], "scale": scale(records, decl)}


def scale(records: list[TrunkRecord], decl) -> dict:
    """Each arm's CIDEr-D in each cell, its mean over trunks and seeds: the scale the differences sit on."""
    scores = np.stack([r.scores for r in records])  # [trunk, seed, arm, model, training]
    return {arm: [float(scores[:, :, a, MODELS.index(m), TRAINING.index(t)].mean()) for m, t in decl.pooled_over]
            for a, arm in enumerate(records[0].arms)}


def sign_flip_note(n: int) -> str:
    """What the two p columns assume, and the sign-flip test's floor with ``n`` trunks."""
    return (f"p: the t-test on {n - 1} df, which assumes the {n} per-trunk differences normal. sign-flip p: the exact "
            f"two-sided sign-flip test of the same {n} numbers, which assumes only that each trunk's difference is "
            f"symmetric about zero under the null; exact over the 2^{n} = {2 ** n} sign patterns, it cannot go below "
            f"2/{2 ** n} = {2 / 2 ** n:.4g}.")


def markdown(result: dict) -> str:
    p, k = result["primary"], result["known_effect"]
    detected = k["p"] < result["declared"]["alpha"] and k["mean"] > 0

    def line(c: dict) -> str:
        t = c["tost"]
        return (f"| {c['contrast']} | {c['mean']:+.3f} | [{c['low']:+.3f}, {c['high']:+.3f}] | {c['p']:.3g} | "
                f"{c['sign_flip_p']:.3g} | [{t['low']:+.3f}, {t['high']:+.3f}] | {t['p']:.3g} | "
                f"{c['detectable']:.3f} |")

    margin = result["declared"]["equivalence_margin"]
    lines = [f"### Table 1, pooled over the four cells ({len(result['ran']['trunks'])} trunks, "
             f"{result['ran']['test_images']} test images; CIDEr-D)", "",
             f"**Primary: {p['contrast']}**: {p['verdict']}. The plan promised {result['promise']['power']:.0%} power "
             f"at {result['promise']['effect']:.2f}; detectable at this spread: {p['detectable']:.3f}.", "",
             f"**Known-effect check, {k['contrast']}**: {'detected' if detected else 'NOT detected'}"
             f" ({k['mean']:+.3f}, p {k['p']:.3g}).", "",
             f"| pooled contrast | mean | 95% interval | p | sign-flip p | TOST 90% interval | TOST p (±{margin:g}) | "
             "detectable |", "|---|---:|---:|---:|---:|---:|---:|---:|", line(p), line(k),
             *(line(s) for s in result["secondary"]), "",
             "The first row is the primary test and the second the known-effect check; the others are numbers and "
             f"intervals, with no verdict words. TOST: two one-sided t-tests against ±{margin:g} (equivalence where "
             "its p < alpha).", "", sign_flip_note(len(result["ran"]["trunks"])), "",
             "Secondary: the primary contrast's cells (Holm over the four; numbers and intervals, no verdicts).", "",
             "| cell | mean | 95% interval | p | sign-flip p | Holm p |", "|---|---:|---:|---:|---:|---:|"]
    lines += [f"| {c['model']} {c['training']} | {c['mean']:+.3f} | [{c['low']:+.3f}, {c['high']:+.3f}] | "
              f"{c['p']:.3g} | {c['sign_flip_p']:.3g} | {c['holm_p']:.3g} |" for c in result["cells"]]
    cell_names = [f"{c['model']} {c['training']}" for c in result["cells"]]
    lines += ["", "The scale: each arm's CIDEr-D, mean over trunks and seeds.", "",
              "| arm | " + " | ".join(cell_names) + " |", "|---|" + "---:|" * len(cell_names)]
    lines += [f"| {arm} | " + " | ".join(f"{v:.3f}" for v in values) + " |" for arm, values in result["scale"].items()]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m studies.table1_pooled.pooled_table",
                                     description=__doc__.splitlines()[0])
    ap.add_argument("--records", type=Path, default=RECORDS, help="the kept trunk records [%(default)s]")
    ap.add_argument("--declaration", type=Path, default=DEFAULT)
    ap.add_argument("--out", type=Path, default=None, help="[the records' folder]")
    a = ap.parse_args(argv)
    decl = load_declaration(a.declaration)
    result = analyse(collect(a.records, decl, a.declaration), decl, a.declaration.resolve())
    out = a.out or a.records
    write_text(out / "table1_pooled.json", json.dumps(result, indent=1, default=float) + "\n")
    write_text(out / "table1_pooled.md", markdown(result))
    print(markdown(result))


if __name__ == "__main__":
    run_cli(main)
