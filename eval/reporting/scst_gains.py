"""What SCST did to each captioner: ``python -m eval.reporting.scst_gains CAPTIONERS_DIR [--out FILE.md]``.

CAPTIONERS_DIR holds XE runs and the SCST runs started from them, as scripts/pipeline.sh leaves them
(``img_att2all2`` and ``img_att2all2_scst``, ...). For each pair it reads the test metrics of both
(eval.score_captions' metrics_test.json) and the SCST run's history.json (val CIDEr-D at epoch 0, the XE
start, and at its best epoch), and checks what a user expects of SCST (issue #26):

- CIDEr-D above the XE run's;
- BLEU-4 at least 90% of the XE run's (SCST should not buy CIDEr-D with n-gram precision; 90%, not issue
  #26's 95%: on this templated data SCST on CIDEr-D trades a little 4-gram precision, within the seed spread,
  issue #36). 90% is the usual level; the demo's health bar, one seed per run, is 85% (BLEU_BAR), so the
  BLEU-4 cell gives the ratio and the summary says how many runs hold the bar;
- distinct captions at least 80% of the XE run's (no collapse onto a few safe sentences);
- bad endings (captions whose last word ends no training reference) at most 2 points above the XE
  run's (no learned truncation, "a man riding a horse on a": SacreEOS, Barraco et al. 2023).

Test numbers are reported, never used to choose anything: studies.scst_recipes.scst_recipes chooses on val.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli

FIELDS = ("C", "B4", "distinct", "bad", "length")
CHECKS = {  # name: (what it says, test on (xe, scst))
    "C up": ("CIDEr-D above XE's", lambda x, s: s["C"] > x["C"]),
    "B4 >= 90%": ("BLEU-4 at least 90% of XE's", lambda x, s: s["B4"] >= 0.90 * x["B4"]),
    "distinct >= 80%": ("distinct captions at least 80% of XE's", lambda x, s: s["distinct"] >= 0.8 * x["distinct"]),
    "bad <= +2 pt": ("bad endings at most XE's + 2 points", lambda x, s: s["bad"] <= x["bad"] + 0.02),
}
SUFFIXES = ("_scst", "_sr")  # an SCST run's folder: <XE run>_scst, or <XE run>_sr with the self-retrieval reward
BLEU_BAR = 0.85  # the demo's SCST health bar for BLEU-4, one seed per run: below the usual 90%, which one seed
# on 200 templated test images can miss by chance (Top-Down/Cap 89.2% held to AVX2, docs/devices.md)


def _json(path: Path, what: str):
    try:
        return json.loads(path.read_text())
    except (OSError, json.JSONDecodeError) as err:
        raise CapawareError(path, f"cannot read the {what} ({err.__class__.__name__})",
                            "finish the run with scripts/stage3_captioners.sh / scripts/stage3_rl.sh") from None


def test_numbers(run: Path, split: str = "test") -> dict:
    """CIDEr-D, BLEU-4, distinct captions, bad endings and mean length of a run's scored predictions."""
    m = _json(run / f"metrics_{split}.json", "metrics file (eval.score_captions)")
    d = m.get("discriminativeness") or {}
    if d.get("bad_endings") is None:
        raise CapawareError(run / f"metrics_{split}.json", "has no bad_endings figure (scored before issue #26)",
                            "score it again: python -m eval.score_captions, or rerun the stage script")
    return {"C": m["metrics"]["CIDEr-D"], "B4": m["metrics"]["BLEU-4"], "distinct": d["distinct_captions"],
            "bad": d["bad_endings"], "length": d["mean_length"], "signature": m.get("scst_signature")}


def val_numbers(scst_run: Path) -> dict:
    """Val CIDEr-D, bad endings, distinct captions and BLEU-4 of the XE start (epoch 0) and of best.pt's epoch
    (the best val CIDEr-D among the validations the collapse guard allowed), from history.json."""
    history = _json(scst_run / "history.json", "history (rl.scst)")
    start = history[0]
    best = max((h for h in history if h.get("eligible", True)), key=lambda h: h["cider_d"])  # best.pt's
    return {"val_C_xe": start["cider_d"], "val_C": best["cider_d"], "best_epoch": best["epoch"],
            "val_bad_xe": start.get("bad_endings"), "val_bad": best.get("bad_endings"),
            "val_distinct_xe": start.get("distinct_captions"), "val_distinct": best.get("distinct_captions"),
            "val_B4_xe": start.get("bleu4"), "val_B4": best.get("bleu4")}


def pair(xe_run: str | Path, scst_run: str | Path) -> dict:
    """One XE -> SCST pair: both runs' test numbers, val numbers, and the four checks."""
    xe_run, scst_run = Path(xe_run), Path(scst_run)
    xe, scst = test_numbers(xe_run), test_numbers(scst_run)
    row = {"xe_run": str(xe_run), "scst_run": str(scst_run), "xe": xe, "scst": scst, **val_numbers(scst_run)}
    row["checks"] = {name: bool(test(xe, scst)) for name, (_, test) in CHECKS.items()}
    row["health_bar"] = health(row)
    return row


def health(row: dict) -> bool:
    """The demo's SCST health bar: the four checks, with BLEU-4 at BLEU_BAR of XE's instead of 90%."""
    x, s, checks = row["xe"], row["scst"], row["checks"]
    return all(v for k, v in checks.items() if k != "B4 >= 90%") and s["B4"] >= BLEU_BAR * x["B4"]


def pairs_in(folder: str | Path) -> list[tuple[Path, Path]]:
    folder = Path(folder)
    found = [(folder / p.name[:-len(suffix)], p) for suffix in SUFFIXES for p in sorted(folder.glob(f"*{suffix}"))
             if p.is_dir()]
    found = [(x, s) for x, s in found if x.is_dir()]
    if not found:
        raise CapawareError(folder, "holds no XE run with its SCST run (<name> and <name>_scst)",
                            "point at a pipeline run's captioners folder, e.g. runs/demo/captioners")
    return found


def _ratio(scst: float, xe: float) -> str:
    return f"{scst / xe:.1%}" if xe > 0 else "XE 0"  # a tiny run's XE can score BLEU-4 0


def markdown(rows: list[dict]) -> str:
    lines = ["| run | CIDEr-D XE → SCST | BLEU-4 | distinct | bad endings | mean length | "
             + " | ".join(CHECKS) + " |", "|---|---|---|---|---|---|" + "---|" * len(CHECKS)]
    for r in rows:
        x, s = r["xe"], r["scst"]
        lines.append(f"| {Path(r['scst_run']).name} | {x['C']:.3f} → {s['C']:.3f} | "
                     f"{x['B4']:.3f} → {s['B4']:.3f} ({_ratio(s['B4'], x['B4'])}) | "
                     f"{x['distinct']:.2f} → {s['distinct']:.2f} | {x['bad']:.1%} → {s['bad']:.1%} | "
                     f"{x['length']:.2f} → {s['length']:.2f} | "
                     + " | ".join("yes" if r["checks"][c] else "**no**" for c in CHECKS) + " |")
    passed = sum(all(r["checks"].values()) for r in rows)
    signatures = sorted({str(r["scst"]["signature"]) for r in rows})
    lines += ["", f"All four checks hold for {passed} of {len(rows)} SCST runs (test split; "
                  + "; ".join(f"{c}: {d}" for c, (d, _) in CHECKS.items()) + "). SCST signature: "
                  + ", ".join(f"`{s}`" for s in signatures) + ".",
              "", f"The demo's SCST health bar (CIDEr-D up; BLEU-4 at least {BLEU_BAR:.0%} of XE's, one seed; "
                  f"distinct and bad endings as above) holds for {sum(r['health_bar'] for r in rows)} of {len(rows)} "
                  "SCST runs."]
    return "\n".join(lines) + "\n"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("captioners", help="a pipeline run's captioners folder (XE runs and their _scst runs)")
    parser.add_argument("--out", default=None, help="also write the table (Markdown) and FILE.json")
    a = parser.parse_args(argv)
    rows = [pair(x, s) for x, s in pairs_in(a.captioners)]
    text = markdown(rows)
    if a.out:
        out = Path(a.out)
        write_text(out, text)
        write_text(out.with_suffix(".json"), json.dumps({"rows": rows, "command": " ".join(
            ["python -m eval.reporting.scst_gains", *(argv if argv is not None else sys.argv[1:])])}, indent=1))
    print(text, end="")


if __name__ == "__main__":
    run_cli(main)
