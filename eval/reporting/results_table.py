"""Captioning results in the layout of Kim et al.'s Table 1:
``python -m eval.reporting.results_table RUN... --out DIR``.

Each RUN is a captioner run folder (every ``metrics_*.json`` / ``*.metrics.json`` in it is one row) or
a metrics JSON of ``eval.score_captions`` itself. A row's identity is read from the files the captions came
from, never from folder names, so a renamed folder or a swapped features file cannot mislabel it:

    model     ``core`` of the predictions' meta (``PREDS.meta.json``, written by captioners.predict);
              for an older meta, ``model.core`` of the config.yaml next to its checkpoint
    features  attribute ``backbone`` of the features file the meta names (read with h5py):
              imagenet | class-pretrained -> Img, metric-learning -> Cap, oracle -> Oracle, anything else
              -> Custom; a ``label`` attribute (set by the dump's config: Attr, Cap2) names the row instead
    training  ``stage`` of the meta: xe -> XE, rl -> RL (XE when absent)

Rows are ordered Model (the cores' registration order) x Features (Img, Cap, ...) x Training (XE, RL); the
columns are the scores, then G and D from the ``grounding_<split>.json`` of eval.grounding beside the metrics
file ("n/a" without one) and E from the metrics file; eval/reporting/columns.py holds what each column is and
the legend printed under the table. An RL row also shows its SCST signature, read from the metrics file. A metric the
run could not compute (SPICE without its CoreNLP models, METEOR without Java) is "n/a", with the reason among the notes.
Written to DIR: ``captioning.md`` (the table, repeated Model/Features cells left blank as in the paper),
``captioning.csv`` and ``captioning.json`` (every row with its metrics file, predictions, features
file, backbone, decoding and config hash).
"""
from __future__ import annotations

import argparse
import csv
import io
import json
import os
import shlex
import sys
from pathlib import Path

import h5py

from capcore.atomic import write_text
from capcore.errors import CapawareError, run_cli
from capcore.run_layout import CaptionerDir
from capdata.captions import DEFAULT as DEFAULT_FORMAT
from capdata.formats import FORMATS
from captioners.core_registry import CORES, display_name
from eval.reporting import columns
from feature_extract.row_labels import label_of

COLUMNS = {c.key: c.name for c in columns.SCORES}
BESIDE = {c.key: c.name for c in columns.BESIDE}
TEXT_SIDE = {c.key: c.name for c in columns.TEXT_SIDE}
ORDER = {"features": columns.order(columns.FEATURES), "training": columns.order(columns.TRAINING)}
STAGE3_FIX = "score the run with scripts/stage3_captioners.sh (captioners.predict, then eval.score_captions)"


def _json(path: Path, what: str) -> dict:
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CapawareError(path, f"{what} not found", STAGE3_FIX) from None
    except (json.JSONDecodeError, UnicodeDecodeError) as err:
        raise CapawareError(path, f"{what} is not valid JSON ({err})", STAGE3_FIX) from None
    if not isinstance(data, dict):
        raise CapawareError(path, f"{what} is not a JSON object", STAGE3_FIX)
    return data


def metrics_files(run: str | Path) -> list[Path]:
    run = Path(run)
    if run.is_file():
        return [run]
    if not run.is_dir():
        raise CapawareError(run, "no such run folder or metrics file", "pass a captioner run folder (out_dir)")
    found = sorted(set(run.glob("metrics_*.json")) | set(run.glob("*.metrics.json")))
    if not found:
        raise CapawareError(run, "no metrics_*.json in this run folder", STAGE3_FIX)
    return found


def features_label(path: Path) -> tuple[str, str, str]:
    """(Img | Cap | Custom, backbone attribute, backbone_method attribute) from the file itself."""
    if not path.is_file():
        raise CapawareError(path, "features file named by the predictions' meta not found (the row's Img/Cap "
                            "label is read from its backbone attribute)", "restore the file, or decode again")
    try:
        with h5py.File(path, "r") as f:
            attrs = {k: f.attrs.get(k, "") for k in ("backbone", "backbone_method", "label")}
    except OSError as err:
        raise CapawareError(path, f"not a readable HDF5 file ({err})", "restore the features file") from None
    backbone, method, label = (v.decode() if isinstance(v, bytes) else str(v) for v in attrs.values())
    return label_of(backbone, label), backbone, method


def _model_core(meta: dict, meta_file: Path) -> str:
    if meta.get("core"):
        return str(meta["core"])
    config = CaptionerDir(Path(str(meta.get("checkpoint", ""))).parent).config
    if config.is_file():
        from omegaconf import OmegaConf

        core = OmegaConf.select(OmegaConf.load(config), "model.core")
        if core:
            return str(core)
    raise CapawareError(meta_file, "names no model core, and no config.yaml lies next to its checkpoint",
                        "decode again with python -m captioners.predict (its meta names the core)")


def read_row(metrics_file: Path) -> dict:
    """One table row from a metrics JSON and the predictions meta / features file behind it."""
    report = _json(metrics_file, "metrics file")
    values = report.get("metrics")
    if not isinstance(values, dict) or "CIDEr-D" not in values:
        raise CapawareError(metrics_file, "not an eval.score_captions metrics file (no metrics.CIDEr-D)", STAGE3_FIX)
    preds = Path(str(report.get("preds", "")))
    if not preds.name:
        raise CapawareError(metrics_file, "does not name its predictions file", STAGE3_FIX)
    meta_file = preds.with_name(preds.stem + ".meta.json")
    if not meta_file.is_file():  # a moved run folder: look beside the metrics file
        meta_file = metrics_file.with_name(meta_file.name)
    meta = _json(meta_file, f"meta of the predictions {preds.name} (written by captioners.predict)")
    if not meta.get("features"):
        raise CapawareError(meta_file, "names no features file", "decode again with python -m captioners.predict")
    label, backbone, backbone_method = features_label(Path(meta["features"]))
    core = _model_core(meta, meta_file)
    stage = str(meta.get("stage") or "xe").upper()
    method, beam = meta.get("method", "?"), int(meta.get("beam_size") or 1)
    decoding = f"beam {beam}" if method == "beam" and beam > 1 else "greedy" if method in ("beam", "greedy") \
        else method
    row = {"model": display_name(core), "core": core, "features": label, "training": stage}
    row.update({col: _number(values.get(name)) for col, name in COLUMNS.items()})
    row.update(read_grounding(metrics_file, report.get("split")))
    disc = report.get("discriminativeness") or {}
    row.update(E=_number(disc.get("bad_endings")), U=_number(disc.get("unique_captions")),
               N=_number(disc.get("novel_captions")))
    row.update(read_self_retrieval(metrics_file, report.get("split")))
    row["signature"] = report.get("scst_signature") or meta.get("scst_signature")
    if row["signature"] and "+SelfRet[" in row["signature"]:
        row["training"] = "RL+SR"
    split = report.get("split")  # metrics files from before the format was recorded: the default format's
    row["caption_format"] = report.get("caption_format", DEFAULT_FORMAT if split else None)
    row.update({"split": split, "n_images": report.get("n_images"),
                "n_split_images": report.get("n_split_images"), "decoding": decoding,
                "metrics_file": _shown(metrics_file), "preds": str(preds), "features_file": str(meta["features"]),
                "backbone": backbone, "backbone_method": backbone_method, "config_hash": report.get("config_hash"),
                "unavailable": {col: report.get("unavailable", {}).get(name)
                                for col, name in COLUMNS.items() if values.get(name) is None}})
    return row


def read_grounding(metrics_file: Path, split) -> dict:
    """G and D of the row from eval.grounding's file beside the metrics file (None when absent)."""
    path = metrics_file.with_name(f"grounding_{split}.json")
    if not path.is_file():
        return {"G": None, "D": None, "grounding_file": None}
    g = _json(path, "grounding file (eval.grounding)")
    return {"G": _number(g.get("ratio_real_shuffled")), "D": _number(g.get("distinct_fraction_real")),
            "grounding_file": _shown(path)}


def read_self_retrieval(metrics_file: Path, split) -> dict:
    """SR1/SR5/SR10 of the row from eval.self_retrieval's file beside the metrics file (None when absent)."""
    path = metrics_file.with_name(f"self_retrieval_{split}.json")
    if not path.is_file():
        return {"SR1": None, "SR5": None, "SR10": None, "self_retrieval_file": None}
    sr = _json(path, "self-retrieval file (eval.self_retrieval)")
    return {"SR1": _number(sr.get("r1")), "SR5": _number(sr.get("r5")), "SR10": _number(sr.get("r10")),
            "self_retrieval_file": _shown(path)}


def shown_columns(rows: list[dict]) -> list[str]:
    """The columns after the scores: G, D, E, and the text side's when a row has a self-retrieval record."""
    text_side = any(r.get("self_retrieval_file") for r in rows)
    return [*BESIDE, *(TEXT_SIDE if text_side else ())]


def _number(v) -> float | None:
    return float(v) if isinstance(v, (int, float)) and not isinstance(v, bool) else None


def _shown(path: Path) -> str:
    """Relative to the working folder when below it (readable tables), else absolute."""
    path = path.resolve()
    try:
        return str(path.relative_to(Path.cwd().resolve()))
    except ValueError:
        return str(path)


def sort_rows(rows: list[dict]) -> list[dict]:
    def rank(key: str, value: str) -> tuple[int, str]:
        order = list(CORES) if key == "model" else ORDER[key]  # cores in their registration order
        return (order.index(value), "") if value in order else (len(order), value)

    return sorted(rows, key=lambda r: (rank("model", r["core"]), rank("features", r["features"]),
                                       rank("training", r["training"])))


def notes_of(rows: list[dict]) -> list[str]:
    notes = []
    for col in COLUMNS:
        reasons = {r["unavailable"][col] or "not computed" for r in rows if col in r["unavailable"]}
        for why in sorted(reasons):
            notes.append(f"{col} ({COLUMNS[col]}) n/a: {why}")
    keys = [(r["model"], r["features"], r["training"]) for r in rows]
    for key in sorted({k for k in keys if keys.count(k) > 1}):
        notes.append(f"{' / '.join(key)} appears more than once (one row per metrics file)")
    for what in ("split", "decoding"):
        if len({str(r[what]) for r in rows}) > 1:
            notes.append(f"rows differ in {what} ({', '.join(sorted({str(r[what]) for r in rows}))}): not comparable")
    for r in rows:
        if r["n_split_images"] and r["n_images"] and r["n_images"] < r["n_split_images"]:
            notes.append(f"{r['metrics_file']}: {r['n_images']} of the {r['n_split_images']} {r['split']} images")
    if any(r["features"] == "Custom" for r in rows):
        notes.append("Custom: features from a backbone that is neither ImageNet/class-pretrained (Img) nor "
                     "metric learning (Cap); see the backbone column of the CSV/JSON")
    return notes


def _cell(row: dict, col: str) -> str:
    v = row[col]
    return "n/a" if v is None else f"{v:.{columns.digits(col)}f}"


def split_title(row: dict) -> str:
    """What the heading calls the images a row was scored on: "Karpathy test split", by the format's title."""
    if row.get("split") is None:
        return "every image of a references file without splits"
    fmt = row.get("caption_format") or DEFAULT_FORMAT
    known = FORMATS.get(fmt)  # a plugin's format this process has not loaded goes by its name
    return f"{known.title if known and known.title else fmt} {row['split']} split"


def markdown(rows: list[dict], notes: list[str]) -> str:
    title = f"### Captioning, {' / '.join(sorted({split_title(r) for r in rows}))} (layout of Kim et al. 2019, Table 1)"
    beside = shown_columns(rows)
    head = ["Model", "Features", "Training", *COLUMNS, *beside, "Images", "Decoding", "SCST signature", "Metrics file"]
    lines = [title, "", "| " + " | ".join(head) + " |",
             "|---|---|---|" + "---:|" * (len(COLUMNS) + len(beside)) + "---:|---|---|---|"]
    prev = (None, None)
    for r in rows:
        model = "" if r["model"] == prev[0] else r["model"]
        feats = "" if (r["model"], r["features"]) == prev else r["features"]
        prev = (r["model"], r["features"])
        signature = f"`{r['signature']}`" if r.get("signature") else "—"
        cells = [model, feats, r["training"], *(_cell(r, c) for c in [*COLUMNS, *beside]), str(r["n_images"]),
                 r["decoding"], signature, f"`{r['metrics_file']}`"]
        lines.append("| " + " | ".join(cells) + " |")
    lines += ["", columns.legend(text_side=len(beside) > len(BESIDE))]
    lines += [f"- {n}" for n in notes]
    return "\n".join(lines) + "\n"


CSV_FIELDS = ["model", "features", "training", *COLUMNS, *BESIDE, *TEXT_SIDE, "n_images", "split", "decoding",
              "signature", "metrics_file", "preds", "features_file", "backbone", "backbone_method", "config_hash"]


def to_csv(rows: list[dict]) -> str:
    buf = io.StringIO()
    w = csv.DictWriter(buf, fieldnames=CSV_FIELDS, extrasaction="ignore", lineterminator="\n")
    w.writeheader()
    for r in rows:
        w.writerow({**r, **{c: "n/a" if r[c] is None else repr(r[c]) for c in [*COLUMNS, *BESIDE, *TEXT_SIDE]}})
    return buf.getvalue()


def build_table(runs: list[str | Path]) -> tuple[list[dict], list[str]]:
    files = list(dict.fromkeys(p.resolve() for run in runs for p in metrics_files(run)))
    rows = sort_rows([read_row(p) for p in files])
    return rows, notes_of(rows) + untabled_siblings(runs)


def untabled_siblings(runs: list[str | Path]) -> list[str]:
    """A note naming scored captioner runs beside the tabled ones that this table leaves out: a pipeline tables
    its own config's captioners, so another config's runs in the same run folder (the demo's Transformer ones
    after `make demo`) would otherwise vanish from the table without a word."""
    folders = [Path(r).resolve() for r in runs if Path(r).is_dir()]
    parents = {f.parent for f in folders}
    if len(parents) != 1:
        return []
    parent = parents.pop()
    others = sorted(d.name for d in parent.iterdir()
                    if d.is_dir() and d not in folders and any(d.glob("metrics_*.json")))
    if not others:
        return []
    return [f"not in this table: {len(others)} other scored run(s) in {_shown(parent)} ({', '.join(others)}); "
            f"python -m eval.reporting.results_table {_shown(parent)}/*/metrics_*.json --out DIR "
            "tables them all"]


def write_table(runs: list[str | Path], out_dir: str | Path, command: str = "") -> str:
    """Write captioning.{md,csv,json} into ``out_dir``; return the Markdown."""
    rows, notes = build_table(runs)
    out_dir = Path(out_dir)
    text = markdown(rows, notes)
    write_text(out_dir / "captioning.md", text)
    write_text(out_dir / "captioning.csv", to_csv(rows))
    write_text(out_dir / "captioning.json", json.dumps({"columns": COLUMNS, "rows": rows, "notes": notes,
                                                         "command": command}, indent=1))
    return text


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("runs", nargs="+", help="captioner run folders (out_dir) or metrics JSON files")
    parser.add_argument("--out", required=True, help="folder for captioning.md / .csv / .json")
    a = parser.parse_args(argv)
    args = argv if argv is not None else sys.argv[1:]
    text = write_table(a.runs, a.out,
                       " ".join(shlex.quote(x) for x in ["python", "-m", "eval.reporting.results_table", *args]))
    print(text + f"-> {os.path.join(a.out, 'captioning')}.{{md,csv,json}}")


if __name__ == "__main__":
    run_cli(main)
