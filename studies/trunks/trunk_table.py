"""Table 1 over stage-one trunks, under the study's declaration:
``python -m studies.trunks.trunk_table RUN [--declaration FILE] [--out DIR]`` (studies/trunks/study_trunks.sh).

RUN holds one folder per trunk, ``t<seed>``, each with the per-seed tables studies/table1_seeds/table1_seeds.sh wrote
(``t<seed>/results/table1/s<captioner seed>/captioning.json``). For every comparison the declaration names
(studies/trunks/configs/declaration_table1.yaml) this writes, per model and training stage:

- the trunk-level test (studies.trunks.trunk_stats.trunk_test: one number per trunk, trunks − 1 df), its
  detectable effect, and for the primary cells Holm's decision at the declared alpha;
- the variance components (trunk, captioner seed within trunk, test image), the trunks a .02 effect would
  need with the declared seeds and images, and the test images it would need with the declared trunks;
- the combined variant (trunks and test images as error; df capped at trunks − 1), named as such;
- the declared standardisation check: the primary cells from the captioners without input standardisation
  (``t<seed>/raw/``), their own Holm family, and whether each decision is the standardised one's.

The JSON carries the declaration's stamp and what actually ran; studies.declaration.results_follow
holds one against the other. It also carries the commit that computed it (``computed_at``: studies.provenance).
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from studies.declaration import DEFAULT, Comparison, load_declaration, stamp
from studies.provenance import with_commit
from studies.table1_seeds.results_seeds import paired_test, per_image_scores, read_table
from studies.trunks.trunk_stats import components, holm, images_needed, trunk_test, trunks_needed

MODELS = ("Att2all2", "Top-Down")
TRAINING = ("XE", "RL")
EFFECT = 0.02  # the size the issue asks about: the paper's effects are .010-.028 CIDEr-D


def collect(run: Path, trunks: list[int], seeds: list[int], variant: str = "") -> dict[int, dict[int, dict]]:
    """trunk -> captioner seed -> that seed's Table 1 ({(model, features, training): row}); ``variant``: a
    subfolder of each trunk's (``raw``: the standardisation check's captioners)."""
    tables: dict[int, dict[int, dict]] = {}
    for t in trunks:
        for s in seeds:
            path = run / f"t{t}" / variant / "results" / "table1" / f"s{s}" / "captioning.json"
            if not path.is_file():
                raise CapawareError(path, f"trunk {t}, captioner seed {s} has no Table 1 yet",
                                    f"run bash studies/trunks/study_trunks.sh {run} {t} (it resumes)")
            tables.setdefault(t, {})[s] = read_table(path)
    return tables


def cell(tables, comparison: Comparison, model: str, training: str) -> dict | None:
    """The comparison's differences: per trunk, per seed (CIDEr-D), and per image averaged over every run."""
    a_key, b_key = (model, comparison.features, training), (model, comparison.baseline, training)
    diffs, images = [], []
    for trunk in tables.values():
        row = []
        for table in trunk.values():
            if a_key not in table or b_key not in table:
                return None
            a, b = table[a_key], table[b_key]
            row.append(float(a["C"]) - float(b["C"]))
            pa, pb = per_image_scores(a), per_image_scores(b)
            if pa is not None and pb is not None and set(pa) == set(pb):
                images.append([pa[i] - pb[i] for i in sorted(pa)])
        diffs.append(row)
    image_diffs = np.mean(images, axis=0) if images and len(images) == sum(map(len, diffs)) else None
    return {"diffs": diffs, "image_diffs": image_diffs}


def analyse(tables, decl) -> dict:
    seeds = len(decl.captioner_seeds)
    out = {"primary": [], "secondary": []}
    for kind, comparisons in (("primary", decl.primary), ("secondary", decl.secondary)):
        for c in comparisons:
            for model in ([c.model] if c.model else MODELS):
                for training in ([c.training] if c.training else TRAINING):
                    data = cell(tables, c, model, training)
                    if data is None:
                        continue
                    test = trunk_test(data["diffs"], alpha=decl.alpha)
                    comps = components(data["diffs"], data["image_diffs"])
                    image = None
                    if comps.image is not None:
                        image = (float(np.sqrt(comps.image / comps.n_images)), comps.n_images)
                    combined = paired_test(test["trunk_means"], image) if image else None
                    out[kind].append({
                        "model": model, "training": training, "features": c.features, "baseline": c.baseline,
                        "diffs": data["diffs"], "test": test, "combined": combined,
                        "components": {"trunk": comps.trunk, "seed": comps.seed, "image": comps.image,
                                       "n_images": comps.n_images},
                        "trunks_for_02": trunks_needed(EFFECT, comps, seeds, decl.test_images, decl.alpha),
                        "images_for_02": images_needed(EFFECT, comps, len(decl.trunks), seeds, decl.alpha)})
    apply_holm(out["primary"], decl.alpha)
    return out


def apply_holm(cells: list[dict], alpha: float) -> None:
    """Holm's decision and adjusted p on each cell of a family, in place."""
    rejected, adjusted = holm([c["test"]["p"] for c in cells], alpha) if cells else ([], [])
    for c, r, p in zip(cells, rejected, adjusted):
        c["holm"] = {"rejected": r, "adjusted_p": p}


def standardisation_check(run: Path, decl, primary: list[dict]) -> dict | None:
    """The primary cells again from the captioners without input standardisation (RUN/t<seed>/raw), with their
    own Holm family, and whether each cell's decision (and its sign when rejected) is the standardised one's.
    None while a trunk's check has not run."""
    try:
        tables = collect(run, list(decl.trunks), list(decl.captioner_seeds), variant="raw")
    except CapawareError:
        return None
    cells = []
    for c in decl.primary:
        data = cell(tables, c, c.model, c.training)
        if data is not None:
            cells.append({"model": c.model, "training": c.training, "features": c.features,
                          "baseline": c.baseline, "diffs": data["diffs"],
                          "test": trunk_test(data["diffs"], alpha=decl.alpha)})
    apply_holm(cells, decl.alpha)
    decision = {(c["model"], c["training"]): decided(c) for c in primary}
    for c in cells:
        c["same_decision"] = decided(c) == decision.get((c["model"], c["training"]))
    return {"cells": cells, "verdict_unchanged": len(cells) == len(primary) and all(c["same_decision"]
                                                                                    for c in cells)}


def decided(c: dict) -> str:
    """A primary cell's decision: '>' or '<' when Holm rejects, '=' when it does not."""
    if not c["holm"]["rejected"]:
        return "="
    return ">" if c["test"]["mean"] > 0 else "<"


def verdict(c: dict) -> str:
    t, name = c["test"], f"{c['features']} − {c['baseline']}"
    if c.get("holm", {}).get("rejected"):
        side = ">" if t["mean"] > 0 else "<"
        return f"{c['features']} {side} {c['baseline']} (Holm-adjusted p = {c['holm']['adjusted_p']:.3f})"
    if "holm" in c:
        return f"no difference detectable at ± {t['detectable']:.3f} (Holm-adjusted p = {c['holm']['adjusted_p']:.2f})"
    return f"{name}: p = {t['p']:.2f} unadjusted, detectable ± {t['detectable']:.3f} (secondary: no verdict)"


def markdown(result: dict, decl, declaration: Path) -> str:
    lines = [f"### Table 1 over {len(decl.trunks)} stage-one trunks ({len(decl.captioner_seeds)} captioner seeds "
             f"each; CIDEr-D, test split)", "",
             f"Declared in `{declaration.name}` (sha256 {result['declared']['declaration_sha256'][:12]}): the trunk is "
             f"the unit; one number per trunk (its seeds' mean difference), t on trunks − 1 df; Holm over the "
             f"{len(decl.primary)} primary cells at {decl.alpha}.", "",
             "| Model | Training | Comparison | ΔC (trunk means) | mean | se | df | detectable | p | combined p (df) "
             "| var trunk / seed / image | trunks for .02 | images for .02 | Verdict |",
             "|---|---|---|---|---:|---:|---:|---:|---:|---|---|---:|---:|---|"]
    for kind in ("primary", "secondary"):
        for c in result[kind]:
            t, k, comb = c["test"], c["components"], c["combined"]
            means = ", ".join(f"{m:+.3f}" for m in t["trunk_means"])
            image = f"{k['image']:.2e}" if k["image"] is not None else "n/a"
            comb_text = f"{comb['p']:.3f} ({comb['df']:.0f})" if comb else "n/a"
            need = c["trunks_for_02"] if c["trunks_for_02"] is not None else "> 1000"
            images = f"{c['images_for_02']:,}" if c["images_for_02"] is not None else "none enough"
            lines.append(f"| {c['model']} | {c['training']} | {c['features']} − {c['baseline']} | {means} | "
                         f"{t['mean']:+.3f} | {t['se']:.3f} | {t['df']} | {t['detectable']:.3f} | {t['p']:.3f} | "
                         f"{comb_text} | {k['trunk']:.2e} / {k['seed']:.2e} / {image} | {need} | {images} | "
                         f"{verdict(c)} |")
    lines += ["", "Primary rows first, then the declared secondary rows (unadjusted, never verdicts). detectable: "
              "the smallest true difference found at the 5% level with 80% power at the trunk level. combined: "
              "trunks and test images as error, df capped at trunks − 1 (never more confident than the trunk test). "
              "var: method-of-moments components of one difference (trunk, seed within trunk, one test image). "
              f"trunks for .02: with {len(decl.captioner_seeds)} seeds and {decl.test_images} test images each. "
              f"images for .02: the test images {len(decl.trunks)} trunks of {len(decl.captioner_seeds)} seeds "
              "would need (none enough: the trunk and seed spread alone exceed what a .02 effect leaves room for)."]
    lines += check_markdown(result.get("standardised_check"))
    return "\n".join(lines) + "\n"


def check_markdown(check: dict | None) -> list[str]:
    head = ["", "#### The standardisation check (declared): the primary cells without input standardisation", ""]
    if check is None:
        return head + ["Not run yet for every trunk (studies/trunks/study_trunks.sh runs it in RUN/t<seed>/raw)."]
    lines = head + ["| Model | Training | Comparison | ΔC (trunk means) | mean | p | Holm-adjusted p | decision "
                    "| same as standardised |", "|---|---|---|---|---:|---:|---:|---|---|"]
    for c in check["cells"]:
        t = c["test"]
        means = ", ".join(f"{m:+.3f}" for m in t["trunk_means"])
        lines.append(f"| {c['model']} | {c['training']} | {c['features']} − {c['baseline']} | {means} | "
                     f"{t['mean']:+.3f} | {t['p']:.3f} | {c['holm']['adjusted_p']:.3f} | {decided(c)} | "
                     f"{'yes' if c['same_decision'] else 'no'} |")
    word = "does not change" if check["verdict_unchanged"] else "changes"
    return lines + ["", f"Standardising the captioners' inputs {word} the primary verdict (decision: > or < where "
                        "Holm rejects at the declared alpha, = where it does not)."]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="the study's folder, holding t<seed>/ per trunk")
    parser.add_argument("--declaration", default=str(DEFAULT))
    parser.add_argument("--out", help="[RUN/results/trunks]")
    args = parser.parse_args(argv)
    run, declaration = Path(args.run), Path(args.declaration)
    decl = load_declaration(declaration)
    tables = collect(run, list(decl.trunks), list(decl.captioner_seeds))
    result = analyse(tables, decl)
    n_images = {len(p) for t in tables.values() for table in t.values() for row in table.values()
                if (p := per_image_scores(row)) is not None}
    if decl.standardised_check:
        result["standardised_check"] = standardisation_check(run, decl, result["primary"])
    result["declared"] = stamp(decl, declaration)
    result["ran"] = {"trunks": sorted(tables), "captioner_seeds": sorted(next(iter(tables.values()))),
                     "test_images": n_images.pop() if len(n_images) == 1 else sorted(n_images)}
    out = Path(args.out or run / "results" / "trunks")
    text = markdown(result, decl, declaration)
    write_text(out / "table1_trunks.md", text)
    write_text(out / "table1_trunks.json", json.dumps(with_commit(result), indent=1, default=float))
    print(text, end="")


if __name__ == "__main__":
    run_cli(main)
