"""METEOR for every captioner run that left it pending, in one METEOR process:
``python -m eval.meteor_pending RUN_DIR [RUN_DIR ...]``.

METEOR 1.5 loads a 62 MB paraphrase table each time its JVM starts: 8-10 s of one core, as much as the rest of a
demo run's scoring together. A pipeline with ``meteor: at_scores`` (the demo's) has its XE and SCST runs score
everything else and leave METEOR pending (``eval.score_captions --meteor-later``, through CAPAWARE_METEOR=later);
its scores stage then runs this once: one JVM for every run, each run's captions scored as
``eval.score_captions`` would have (the same tokenizer, the same METEOR call per run, so the same numbers;
tests/eval/test_caption_metrics.py checks it). Each metrics file (and its per-image file) is rewritten whole, in
place; a run whose METEOR is not pending is left as it is, so a rerun does nothing. Where METEOR cannot run, each
pending file records why, as an in-run score would.
"""
from __future__ import annotations

import argparse
import json
from pathlib import Path

from capcore.atomic import write_text
from capcore.errors import run_cli
from capcore.run_layout import CaptionerDir
from capdata.captions import read_references
from captioners.discriminative import simple_tokenize
from eval import captions_java as jv
from eval.caption_refs import load_preds
from eval.score_captions import METEOR_PENDING


def pending(run_dirs: list[str]) -> list[Path]:
    """The metrics files of ``run_dirs`` whose METEOR is pending, in the order given."""
    files = [f for d in run_dirs for f in sorted(Path(d).glob("metrics_*.json"))]
    return [f for f in files if json.loads(f.read_text()).get("unavailable", {}).get("METEOR") == METEOR_PENDING]


def captions_of(report: dict) -> tuple[list[int], list[str], list[list[str]]]:
    """(image ids, predicted captions, reference captions) of a metrics file, from the files it names."""
    preds = load_preds(report["preds"])
    refs = read_references(report["refs"], report["split"] or "all", report.get("caption_format")).refs
    ids = sorted(preds)
    return ids, [preds[i] for i in ids], [refs[i] for i in ids]


def tokenized(runs: list[tuple], tokenizer: str) -> list[tuple[list[str], list[list[str]]]]:
    """Every run's captions and references through one tokenizer call (PTB is one Java process too)."""
    flat = [c for _, hyps, refs in runs for c in [*hyps, *(r for rs in refs for r in rs)]]
    tokens = jv.ptb_tokenize(flat) if tokenizer == "ptb" else simple_tokenize(flat)
    out, k = [], 0
    for _, hyps, refs in runs:
        hyp_tok = tokens[k:k + len(hyps)]
        k += len(hyps)
        ref_tok = []
        for rs in refs:
            ref_tok.append(tokens[k:k + len(rs)])
            k += len(rs)
        out.append((hyp_tok, ref_tok))
    return out


def fill(path: Path, report: dict, ids: list[int], total: float | None, per: list[float] | None,
         why: str | None) -> None:
    """Write METEOR (or why it is unavailable) into the metrics file and its per-image file."""
    if why is None:
        report["metrics"]["METEOR"] = float(total)
        del report["unavailable"]["METEOR"]
    else:
        report["unavailable"]["METEOR"] = why
    write_text(path, json.dumps(report, indent=1, allow_nan=False))
    split = path.stem.removeprefix("metrics_")
    per_image = CaptionerDir(path.parent).per_image(split)
    if why is None and per_image.is_file():
        by_id = dict(zip(ids, per))
        rows = json.loads(per_image.read_text())
        for row in rows:
            row["METEOR"] = float(by_id[row["image_id"]])
        write_text(per_image, json.dumps(rows, indent=0))


def score_pending(run_dirs: list[str]) -> int:
    """Score every pending run in one METEOR process; returns how many metrics files were filled in."""
    files = pending(run_dirs)
    if not files:
        return 0
    reports = [json.loads(f.read_text()) for f in files]
    runs = [captions_of(r) for r in reports]
    if jv.java_info() is None:  # before tokenizing: the PTB tokenizer is Java too
        for f, r, (ids, _, _) in zip(files, reports, runs):
            fill(f, r, ids, None, None, f"no Java runtime; {jv.JAVA_FIX}")
        return 0
    by_tokenizer: dict[str, list[int]] = {}
    for n, r in enumerate(reports):
        by_tokenizer.setdefault("ptb" if str(r.get("tokenizer", "")).startswith("PTB") else "simple", []).append(n)
    tokens: dict[int, tuple] = {}
    for name, members in by_tokenizer.items():
        tokens.update(zip(members, tokenized([runs[n] for n in members], name)))
    try:
        with jv.Meteor() as m:
            for n, (f, r, (ids, _, _)) in enumerate(zip(files, reports, runs)):
                hyps, refs = tokens[n]
                total, per = m.score(hyps, refs)
                fill(f, r, ids, total, per, None)
    except jv.MeteorError as err:
        for f in pending(run_dirs):  # those not filled before METEOR stopped
            r = json.loads(f.read_text())
            fill(f, r, [], None, None, f"{err}; run python -m capaware.doctor")
        return 0
    return len(files)


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="captioner run folders (their metrics_<split>.json)")
    a = parser.parse_args(argv)
    n = score_pending(a.runs)
    print(f"METEOR: {n} pending run(s) scored in one METEOR process")


if __name__ == "__main__":
    run_cli(main)
