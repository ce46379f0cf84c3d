"""What eval.reporting.report reads from a pipeline run folder.

Retrieval studies: ``RUN/results/<study>/retrieval.json`` (embedder.retrieval_report) and, beside it,
the study's manifest (capcore.run_layout.StudyManifest: track, study folder, data, losses). Captioners:
``RUN/results/captioning/captioning.json`` (eval.reporting.results_table); a row's ``preds`` lies in its
captioner run folder, whose manifest (CaptionerManifest) names the references. Paths recorded inside these files may be
relative to the folder the stage ran in, or the run folder may have moved since, so every path is
looked up by :func:`locate` rather than trusted.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from capcore.run_layout import (
    MANIFEST,
    CaptionerDir,
    CaptionerManifest,
    RunDir,
    StudyDir,
    StudyManifest,
    read_manifest,
    resolve,
)
from capcore.errors import CapawareError
from capdata.captions import ALL, image_files, read_captions, references
from capdata.formats import read_records
from embedder.retrieval_report import BOUNDS
from eval.reporting import columns

TRACKS = ("pose", "layout", "caption")
FEATURE_ORDER = tuple(columns.order(columns.FEATURES))
TRAINING_ORDER = tuple(columns.order(columns.TRAINING))


def locate(path: str | Path | None, run: Path, *bases: Path) -> Path | None:
    """The existing file a recorded path means: as written, under the working folder, the run folder
    (or its parent, or ``bases``), or, for a moved run folder, the path's tail under the run folder."""
    if not path or "${" in str(path):
        return None
    p = Path(path)
    if p.is_absolute():
        candidates = [p]
    else:
        candidates = [Path.cwd() / p, run / p, run.parent / p, *(b / p for b in bases)]
    parts = p.parts[1:] if p.is_absolute() else p.parts
    candidates += [run / Path(*parts[i:]) for i in range(1, len(parts) - 1)]  # tails of >= 2 parts
    return next((c for c in candidates if c.exists()), None)


def shown(path: Path | str | None, run: Path) -> str:
    """A path as the report prints it: relative to the run folder's parent when below it."""
    if path is None:
        return "?"
    p = Path(path).resolve()
    for base in (run.resolve().parent, Path.cwd().resolve()):
        try:
            return str(p.relative_to(base))
        except ValueError:
            continue
    return str(p)


def read_json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None


# ------------------------------------------------------------------------------------- retrieval


@dataclass
class Study:
    name: str  # its folder under RUN/results
    results_dir: Path
    title: str
    rows: dict[str, dict]  # retrieval.json rows, in table order
    run_dir: Path | None  # the study folder: config.yaml, retrieval/*.npz, items.json, methods/
    track: str
    sweep: bool
    losses: dict[str, str]  # row name -> loss of its method
    data: dict  # root, format, annotation of the dataset; query_split, db_split of the evaluation

    @property
    def k_max(self) -> int:
        return min(len(r["ndcg"]) for r in self.rows.values())

    def npz(self, name: str, run: Path) -> Path | None:
        found = locate(self.rows[name].get("file"), run)
        if found is None and self.run_dir is not None:  # the rows' npz files moved with their study
            found = locate(StudyDir(self.run_dir).retrieval / Path(str(self.rows[name].get("file", ""))).name, run)
        return found

    def baseline(self) -> str | None:
        """The lower-bound row (Untrained / ImageNet / class-pretrained): order 1, as embedder.rows writes it."""
        return next((n for n, r in self.rows.items() if r.get("order") == 1 or n in BOUNDS[1:]), None)

    def methods(self) -> list[str]:
        base = self.baseline()
        return [n for n in self.rows if n not in BOUNDS and n != base]

    def log_ratio_rows(self) -> list[str]:
        """Rows trained with the log-ratio loss (the study's manifest names each row's loss)."""
        return [n for n in self.methods() if self.losses.get(n) == "log_ratio"]


def _from_manifest(manifest: StudyManifest, run: Path) -> tuple[Path | None, str, bool, dict, dict]:
    study_dir = locate(resolve(manifest.study_dir, run), run)
    data = {**manifest.data, "query_split": manifest.query_split, "db_split": manifest.db_split}
    if data.get("root"):
        data["root"] = str(resolve(data["root"], run))
    return study_dir, manifest.track, manifest.sweep, dict(manifest.losses), data


def load_studies(run: Path) -> tuple[list[Study], list[str]]:
    """Every retrieval study under RUN/results, and a line per retrieval.json that could not be read."""
    studies, problems = [], []
    for path in sorted(RunDir(run).results_root.glob("*/retrieval.json")):
        data = read_json(path)
        rows = data.get("rows") if isinstance(data, dict) else None
        if not isinstance(rows, dict) or not rows \
                or not all(isinstance(r, dict) and r.get("ndcg") for r in rows.values()):
            problems.append(f"{path}: not a retrieval.json of embedder.retrieval_report (no rows with ndcg)")
            continue
        title = str(data.get("title") or path.parent.name)
        manifest = read_manifest(path.parent / MANIFEST, StudyManifest)
        if manifest is None:
            problems.append(f"{path.parent}: no {MANIFEST} beside retrieval.json (rerun its study: python -m "
                            "embedder.rows --config ... writes both)")
            continue
        studies.append(Study(path.parent.name, path.parent, title, rows, *_from_manifest(manifest, run)))
    rank = {t: i for i, t in enumerate(TRACKS)}
    studies.sort(key=lambda s: (rank.get(s.track, len(TRACKS)), s.track, s.name))
    return studies, problems


def load_embeddings(path: Path) -> dict | None:
    """Query and database embeddings of one row with their evaluation item indices (None: not stored)."""
    with np.load(path) as f:
        if "query_emb" not in f or "db_emb" not in f:
            return None
        return {"query_emb": f["query_emb"].astype(np.float32), "db_emb": f["db_emb"].astype(np.float32),
                "query_items": f["query_items"].astype(np.int64), "db_items": f["db_items"].astype(np.int64),
                "name": str(f["name"])}


def study_data(data: dict, root: Path):
    """A study's ``data`` section as a stage-one config's, at ``root`` (where this report found it). The
    embedded default is not generated again here: labels of a missing dataset are reported missing."""
    from omegaconf import OmegaConf

    from capdata.config import DataConfig

    known = {k: v for k, v in data.items() if k in DataConfig.__dataclass_fields__}
    return OmegaConf.merge(OmegaConf.structured(DataConfig), {**known, "root": str(root), "synthetic": None})


def pose_labels(study: Study, run: Path) -> tuple[np.ndarray | None, str]:
    """Joints of every evaluation item in its crop frame ([N, 16, 2] in 0..1, NaN where invisible),
    aligned with the study's items.json, or None and why not."""
    data = study.data
    root = locate(data.get("root"), run, *([study.run_dir] if study.run_dir else []))
    if root is None:
        return None, f"the pose data folder {data.get('root')!r} of {study.name} is not there"
    try:
        records = read_records(study_data(data, root))
    except Exception as err:  # noqa: BLE001 - a label-less map is still drawn; the caption says why
        return None, f"the pose labels could not be read ({str(err)[:160]})"
    splits = [data.get("query_split", "test"), data.get("db_split", "train")]
    keep = np.flatnonzero(np.isin(records.splits, splits))  # the evaluation items, as embedder.rows picks them
    items = read_json(StudyDir(study.run_dir).items) if study.run_dir else None
    paths = items.get("image_paths") if isinstance(items, dict) else None
    tail = lambda p: Path(p).parts[-2:]
    if paths is not None and [tail(records.image_paths[i]) for i in keep] != [tail(p) for p in paths]:
        return None, "the pose labels on disk no longer match the study's evaluation items (items.json)"
    boxes = records.boxes[keep]
    side = (boxes[:, 2] - boxes[:, 0])[:, None, None]
    joints = (records.joints[keep] - boxes[:, None, :2]) / side
    joints[~records.visible[keep]] = np.nan
    return joints.astype(np.float32), ""


# ------------------------------------------------------------------------------------ captioning


@dataclass
class CaptionRun:
    row: dict  # a captioning.json row
    label: str  # e.g. "Top-Down / Cap / RL"
    run_dir: Path | None
    preds_file: Path | None
    preds: dict[int, str] = field(default_factory=dict)
    per_image: dict[int, dict] = field(default_factory=dict)
    refs: Path | None = None  # the Karpathy json the captions were scored against

    @property
    def key(self) -> tuple[str, str, str]:
        return self.row.get("model", "?"), self.row.get("features", "?"), self.row.get("training", "?")


def load_captioning(run: Path) -> tuple[dict | None, list[CaptionRun], Path]:
    """captioning.json and, per row, its run folder with predictions, per-image scores and refs."""
    path = RunDir(run).captioning_json
    table = read_json(path)
    if not isinstance(table, dict) or not isinstance(table.get("rows"), list):
        return None, [], path
    runs = []
    for row in table["rows"]:
        preds_file = locate(row.get("preds"), run)
        run_dir = preds_file.parent if preds_file else None
        label = " / ".join(str(row.get(k, "?")) for k in ("model", "features", "training"))
        cr = CaptionRun(row, label, run_dir, preds_file)
        if preds_file:
            data = read_json(preds_file)
            if isinstance(data, list):
                cr.preds = {int(p["image_id"]): str(p["caption"]) for p in data
                            if isinstance(p, dict) and "image_id" in p}
            split = preds_file.stem.removeprefix("preds_")
            per = read_json(CaptionerDir(run_dir).per_image(split))
            if isinstance(per, list):
                cr.per_image = {int(p["image_id"]): p for p in per if isinstance(p, dict) and "image_id" in p}
        metrics_file = locate(row.get("metrics_file"), run)
        metrics = read_json(metrics_file) if metrics_file else None
        refs = metrics.get("refs") if isinstance(metrics, dict) else None
        manifest = read_manifest(CaptionerDir(run_dir).manifest, CaptionerManifest) if run_dir else None
        if manifest is not None:
            refs = refs or str(resolve(manifest.refs, run))
        cr.refs = locate(refs, run)
        runs.append(cr)
    return table, runs, path


def karpathy_refs(path: Path) -> tuple[dict[int, list[str]], dict[int, Path]]:
    """Ground-truth captions and image files by image id of a run's caption file (any caption format, through
    ``capdata.captions``); none when it cannot be read (the report then says what is missing)."""
    try:
        records = read_captions(path)  # in the format the file shows
    except CapawareError:
        return {}, {}
    return references(records, ALL), image_files(records)


def sort_key(run: CaptionRun) -> tuple[int, int]:
    f, t = run.row.get("features"), run.row.get("training")
    return (FEATURE_ORDER.index(f) if f in FEATURE_ORDER else len(FEATURE_ORDER),
            TRAINING_ORDER.index(t) if t in TRAINING_ORDER else len(TRAINING_ORDER))
