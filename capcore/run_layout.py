"""Where every artifact of a run lives, named once, and the manifests that stages leave for the report.

A run folder (``run_dir``: ``runs/demo`` for the demo) holds::

    data/                       the synthetic datasets (capdata.synthetic)
    logs/<stage>.log            one log per pipeline stage (scripts/pipeline.sh)
    <track>/                    a stage-one study (StudyDir; its config's out_dir)
    features/<name>.h5          stage two
    captions/                   labels.h5, vocab.json (captioners.prepro)
    captioners/<run>/           a captioner run, XE or SCST (CaptionerDir; its config's out_dir)
    results/<name>/             tables written from the runs (RunDir.results)
    report/                     eval.reporting.report

Stages, the pipeline planner, the results tables and the report ask these classes for paths instead of
joining names themselves. Each study (beside its tables) and captioner run also leaves
``manifest.json`` (StudyManifest, CaptionerManifest): what it is and where its inputs are, paths relative to the run
folder when they lie below it, so that eval.reporting.report reads facts instead of guessing from folder shapes and
configs.
"""
from __future__ import annotations

import json
from dataclasses import MISSING, asdict, dataclass, fields
from pathlib import Path

from capcore.atomic import write_text

MANIFEST = "manifest.json"
ITEMS = "items.json"  # in a study's retrieval folder: what each evaluation item shows


@dataclass(frozen=True)
class _Folder:
    root: Path

    def __post_init__(self):  # callers pass config strings or Paths
        object.__setattr__(self, "root", Path(self.root))


@dataclass(frozen=True)
class RunDir(_Folder):
    @property
    def results_root(self) -> Path:
        return self.root / "results"

    def results(self, name: str) -> Path:
        return self.results_root / name

    def seed(self, seed: int) -> "RunDir":
        """Where seed ``seed`` > 0 of a multi-seed study runs (seed 0 is the run itself)."""
        return self if seed == 0 else RunDir(self.root / "seeds" / f"s{seed}")

    @property
    def captioning(self) -> Path:
        return self.results("captioning")

    @property
    def report(self) -> Path:
        return self.root / "report"

    def study_manifest(self, study: str) -> Path:
        """A study's StudyManifest, beside its tables (embedder.rows writes both)."""
        return self.results(study) / MANIFEST

    def retrieval_json(self, study: str) -> Path:
        return self.results(study) / "retrieval.json"

    def retrieval_md(self, study: str) -> Path:
        return self.results(study) / "retrieval.md"

    @property
    def captioning_json(self) -> Path:
        return self.captioning / "captioning.json"

    @property
    def captioning_md(self) -> Path:
        return self.captioning / "captioning.md"

    @property
    def scst_gains_md(self) -> Path:
        """eval.reporting.scst_gains: what SCST did to each captioner, with issue #26's four checks."""
        return self.captioning / "scst_gains.md"


@dataclass(frozen=True)
class TrainDir(_Folder):
    """One trained network: a stage-one method or the class-pretrained backbone."""

    @property
    def model(self) -> Path:
        return self.root / "model.pt"

    @property
    def last(self) -> Path:
        return self.root / "last.pt"


@dataclass(frozen=True)
class StudyDir(_Folder):
    """A stage-one study (``embedder.rows``'s out_dir)."""

    @property
    def config(self) -> Path:
        return self.root / "config.yaml"

    @property
    def labels(self) -> Path:  # the training set's neighbour graph
        return self.root / "labels.h5"

    @property
    def eval_labels(self) -> Path:  # the evaluation split's graph (caption oracle)
        return self.root / "eval_labels.h5"

    @property
    def retrieval(self) -> Path:
        return self.root / "retrieval"

    @property
    def items(self) -> Path:
        return self.retrieval / ITEMS

    def method(self, tag: str) -> TrainDir:
        return TrainDir(self.root / "methods" / tag)

    @property
    def class_pretrained(self) -> TrainDir:
        return TrainDir(self.root / "class_pretrained")


@dataclass(frozen=True)
class CaptionerDir(_Folder):
    """A captioner run, XE or SCST (the config's out_dir; capaware.stage fills it)."""

    def _file(self, name: str) -> Path:
        return self.root / name

    @property
    def best(self) -> Path:
        return self._file("best.pt")

    @property
    def last(self) -> Path:
        return self._file("last.pt")

    @property
    def config(self) -> Path:
        return self._file("config.yaml")

    @property
    def history(self) -> Path:
        return self._file("history.json")

    def preds(self, split: str = "test") -> Path:
        return self._file(f"preds_{split}.json")

    def metrics(self, split: str = "test") -> Path:
        return self._file(f"metrics_{split}.json")

    def per_image(self, split: str = "test") -> Path:
        return self._file(f"per_image_{split}.json")

    def grounding(self, split: str = "test") -> Path:
        return self._file(f"grounding_{split}.json")

    def attention(self, split: str = "test") -> Path:
        return self._file(f"attention_{split}.h5")

    @property
    def attention_pictures(self) -> Path:
        return self._file("attention")

    @property
    def manifest(self) -> Path:
        return self._file(MANIFEST)


# ------------------------------------------------------------------------------------ manifests


def _portable(path: str | Path | None, run_dir: str | Path) -> str | None:
    """A path relative to the run folder when it lies below it (the folder may move), else absolute."""
    if path is None:
        return None
    p = Path(path).resolve()
    try:
        return str(p.relative_to(Path(run_dir).resolve()))
    except ValueError:
        return str(p)


@dataclass
class StudyManifest:
    """What a stage-one study is: eval.reporting.report's retrieval pages read it."""
    name: str
    track: str
    study_dir: str  # relative to the run folder when below it
    sweep: bool  # a dimension sweep (rows "<method> <d>-D")
    losses: dict[str, str]  # row name -> loss of the method behind it
    data: dict  # the study's resolved data section (capdata.config.DataConfig); root made portable
    query_split: str
    db_split: str
    precision: str = ""  # what train.precision chose on this machine, and why (capcore.device.precision_choice)
    kind: str = "stage1"


@dataclass
class CaptionerManifest:
    """What a captioner run is: eval.reporting.report's caption pages read it."""
    stage: str  # xe | rl
    core: str
    features: str  # the features file it trained on
    refs: str  # the Karpathy json its captions are scored against
    precision: str = ""  # what train.precision chose on this machine, and why (capcore.device.precision_choice)
    scst_signature: str = ""  # rl/signature.py, for an SCST run
    kind: str = "captioner"


def write_manifest(path: Path, manifest, run_dir: str | Path) -> None:
    """Write ``manifest`` atomically, its path-like fields made portable against ``run_dir``."""
    data = asdict(manifest)
    for key in ("study_dir", "features", "refs"):
        if data.get(key) is not None:
            data[key] = _portable(data[key], run_dir)
    if isinstance(data.get("data"), dict) and data["data"].get("root"):
        data["data"] = {**data["data"], "root": _portable(data["data"]["root"], run_dir)}
    write_text(path, json.dumps(data, indent=1))


def read_manifest(path: Path, cls):
    """The manifest at ``path`` as ``cls``, or None when missing, unreadable or of another kind."""
    try:
        data = json.loads(Path(path).read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, json.JSONDecodeError):
        return None
    names = {f.name for f in fields(cls)}
    required = {f.name for f in fields(cls) if f.default is MISSING and f.default_factory is MISSING}
    if not isinstance(data, dict) or data.get("kind") != cls.kind or not set(data) <= names \
            or not required <= set(data):
        return None
    return cls(**data)


def resolve(path: str | None, run_dir: str | Path) -> Path | None:
    """A manifest path back on disk: relative ones lie under the run folder."""
    if path is None:
        return None
    p = Path(path)
    return p if p.is_absolute() else Path(run_dir) / p


__all__ = ["RunDir", "TrainDir", "StudyDir", "CaptionerDir", "StudyManifest", "CaptionerManifest",
           "write_manifest", "read_manifest", "resolve", "MANIFEST", "ITEMS"]
