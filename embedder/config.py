"""Typed, validated configs for stage one (OmegaConf structured configs).

A YAML file is merged onto these dataclasses, then ``key=value`` overrides from the command line; an
unknown or mistyped key is a CapawareError naming the key and the file. Every hyper-parameter the
training loop uses lives here, so a config file is the whole description of a run.
"""
from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Optional

from omegaconf import DictConfig, ListConfig, OmegaConf
from omegaconf.errors import OmegaConfBaseException

from capcore.config import PRECISIONS, ConfigChecks, RunConfig
from capcore.config import load_schema
from capcore.errors import CapawareError
from capcore.fingerprint import added_later, bookkeeping
from capdata.config import DataConfig
from capdata.formats import TRACKS, formats_of
from embedder.backbones import RESNET_STAGES, RESNETS, stage_names
from embedder.losses.registry import LOSSES


@dataclass
class GraphConfig:
    m: int = 30  # neighbours kept per training image (>= binary positives and >= k)
    # processes for the caption graph (pose/layout graphs are one matrix product); null: the cores' count, capped by
    # the memory one worker needs for this many images (embedder.labels.graph_memory)
    workers: Optional[int] = bookkeeping(None)
    chunk: int = bookkeeping(512)  # query images per resumable chunk of the caption graph


@dataclass
class CaptionLabelConfig:
    """How caption sets become label distances (caption track only)."""
    space: str = "wmd"  # wmd: Eq. 13 over Word Mover's Distance | tfidf: Gordo & Larlus 2017
    vectors: str = ""  # pretrained word vectors (word2vec bin/text, GloVe); empty: train Word2Vec
    w2v_dim: int = 100  # Word2Vec trained on the training captions (deterministic with ``seed``)
    w2v_epochs: int = 20
    stopwords: str = "gensim"  # stop-word list shipped with gensim; "none" keeps every word


@dataclass
class ModelConfig:
    arch: str = "resnet18"  # resnet10 | resnet18 | resnet34 | resnet50 | resnet101
    embed_dim: int = 128
    init: str = "none"  # none | imagenet | path to a capaware checkpoint
    weights: str = ""  # init=imagenet: a local weight file (torchvision's for a ResNet; for a timm:/torchvision:
    # backbone its .safetensors/.pth/.bin, as timm or Hugging Face ship it); never downloaded


# The rows of Kim et al.'s Fig. 3, written once. A config names one as ``{row: "L(Triplet)+M(Dense)",
# lr: 0.01}`` and gets its loss, mining and margin from here (``name`` defaults to the row; a sweep or
# control renames its variants); keys given beside ``row`` override the row's.
PAPER_ROWS = {
    "L(Log-ratio)+M(Dense)": {"loss": "log_ratio", "mining": "dense"},
    "L(Triplet)+M(Dense)": {"loss": "triplet", "mining": "dense", "margin": 0.03},
    "L(Triplet)+M(Binary)": {"loss": "triplet", "mining": "binary", "margin": 0.2},
    "Margin+DWS": {"loss": "margin", "mining": "binary", "margin": 0.2},
}
# Rows of losses published after the paper, trained beside its rows and compared with its log-ratio + dense
# row, but outside its claims (studies/stage_one_seeds/stage1_seeds.py keeps them out of the Fig. 3 and Fig. 5
# verdicts).
LATER_ROWS = {
    "L(RnC)": {"loss": "rank_n_contrast", "mining": "dense"},  # Rank-N-Contrast, Zha et al. 2023 (issue #29)
}
# Rows of the companion papers' systems (issue #67: Gordo & Larlus 2017, their §5 and Table 2): the visual hinge on
# the k proxy-nearest (V), with the textual losses of Eq. 2 and 3 beside it (V+T), and Eq. 2 alone (WSABIE-like).
# Their margin is not given in the paper: 0.1 until a sweep chooses one.
COMPANION_ROWS = {
    "G17 (V)": {"loss": "g17_hinge", "mining": "binary", "margin": 0.1},
    "G17 (V+T)": {"loss": "g17_hinge", "mining": "binary", "margin": 0.1, "text": {"eq2": 1.0, "eq3": 1.0}},
    "WSABIE-like": {"loss": "g17_hinge", "mining": "binary", "margin": 0.1, "text": {"visual": 0.0, "eq2": 1.0}},
}
ROWS = {**PAPER_ROWS, **LATER_ROWS, **COMPANION_ROWS}


def expand_rows(raw, where: str):
    """``{row: NAME, ...}`` entries of ``methods`` (and ``method``) -> full method entries (ROWS)."""
    def expand(entry):
        if not isinstance(entry, DictConfig) or "row" not in entry:
            return entry
        row = entry.pop("row")
        if row not in ROWS:
            raise CapawareError(where, f"methods: unknown row {row!r}", f"use one of {sorted(ROWS)}")
        return OmegaConf.merge({"name": row, **ROWS[row]}, entry)

    if isinstance(raw.get("methods"), ListConfig):
        raw.methods = [expand(m) for m in raw.methods]
    if "method" in raw:
        raw.method = expand(raw.method)
    return raw


@dataclass
class TextLossConfig:
    """Gordo & Larlus 2017's joint visual and textual embedding (§5.2): the weights of Eq. 2 (image query, texts
    retrieved) and Eq. 3 (text query, images retrieved) beside the row's own loss (``visual``: its weight; 0 with
    eq2 > 0 is their WSABIE-like baseline). The texts are the images' tf-idf caption bags (``captions.space:
    tfidf``) through θ(t) = Wᵀt/‖Wᵀt‖ (joint.tfidf_text); "relevant" is the k = train.positives proxy-nearest."""
    visual: float = 1.0
    eq2: float = 0.0
    eq3: float = 0.0
    margin: float = 0.1  # the paper gives no value
    per_pair: int = 100  # each (query, relevant) pair keeps its hardest irrelevant ones, as their mining does


def text_on(text) -> bool:
    """Whether a row has Gordo & Larlus's text losses (a function: OmegaConf's configs carry no methods)."""
    return text is not None and (text.eq2 > 0 or text.eq3 > 0)


@dataclass
class MethodConfig:
    """One loss + mining combination (a row of the paper's retrieval tables)."""
    name: str = "L(Log-ratio)+M(Dense)"
    # a registered loss (embedder.losses.registry): log_ratio | triplet | margin | rank_n_contrast
    loss: str = "log_ratio"
    mining: str = "dense"  # dense | binary
    margin: float = 0.03  # triplet: 0.03 dense, 0.2 binary; margin loss: alpha
    embed_dim: Optional[int] = None  # overrides model.embed_dim (dimension sweep)
    lr: Optional[float] = None  # overrides train.lr: the log-ratio gradient scales as 1/D(f_a, f_i)
    # (Eq. 6), unlike the triplet losses on unit vectors, so its best SGD step differs (README).
    distance: str = "squared"  # log-ratio D(f): squared (the paper, Eq. 5) | euclidean (the authors' released code)
    temperature: float = 2.0  # rank_n_contrast: tau of exp(-||f_a - f_b|| / tau) (the authors' default 2)
    epochs: Optional[float] = None  # overrides train.epochs (controls: the same row at more steps)
    anchors_per_batch: Optional[int] = None  # overrides train.anchors_per_batch (controls: the paper's 1)
    loss_args: dict[str, float] = added_later(default_factory=dict)  # settings of the loss's own, which its registry
    # entry lists with their defaults (none of the four losses above has any: theirs are the fields above)
    labels: str = added_later(default="real")  # real | shuffled: each training image takes another's label (one fixed
    # permutation drawn from the study's seed; Cap-shuffled) | kinds: the kinds of object present (Img-kinds) | self:
    # distances between the frozen initial trunk's own features (Img-self, issue #56); the evaluation keeps the real
    # labels (embedder/row_labels.py)
    text: TextLossConfig = added_later(default_factory=TextLossConfig)  # Gordo & Larlus's text side (V+T rows)


@dataclass
class PoolConfig:
    """Gordo & Larlus's triplet mining (their §6.1; embedder/g17_pool.py): every ``refresh`` steps, ``queries``
    training images each with ``per_query`` of their relevant ones make a pool, embedded by the current model; each
    (query, relevant) pair keeps its ``per_pair`` largest-loss irrelevant pool images; a step draws ``triplets``."""
    queries: int = 500
    per_query: int = 9
    per_pair: int = 100
    refresh: int = 64
    triplets: int = 64


SAMPLERS = ("anchors", "g17_pool")


@dataclass
class TrainConfig:
    batch_size: int = 150
    k: int = 5  # label-nearest neighbours of each anchor put in its minibatch
    anchors_per_batch: int = 1  # the paper: 1; more anchors share one forward pass on CPU
    positives: int = 30  # binary mining: the anchor's nearest training images count as positives
    epochs: float = 15.0  # may be fractional (a demo trains on part of an epoch)
    optimizer: str = "sgd"  # sgd | adam
    lr: float = 1e-2
    lr_decay: float = 0.9  # exponential decay of lr per epoch
    lr_end_fraction: Optional[float] = None  # instead: decay exponentially to this fraction of lr at the last step,
    # so a shortened (demo) schedule still ends where the full one does; None: lr_decay per epoch
    head_warmup_steps: int = 0  # LP-FT: train the fresh head alone on the frozen trunk first (embedder/head_warmup.py)
    head_warmup_lr: float = 1e-3  # Adam step of that warm-up
    freeze: str = "none"  # none | stem | layer1 | layer2 | layer3: the trunk up to this stage keeps its initial
    # weights (eval-mode BatchNorm); its maps are computed once per image, so a step runs only the rest
    jitter: float = 0.0  # scale and location jitter (embedder/jitter.py): each step's images are random crops of
    # side 1/s, s in [1, 1 + jitter], resized back; no flips (captions say left and right). Needs freeze none
    layer_lr: dict[str, float] = added_later(default_factory=dict)  # per-stage multipliers of the row's lr (stem,
    # layer1-4, head; head includes the loss's parameters), e.g. {layer2: 3, layer3: 3, layer4: 3}: a trunk that has
    # to undo what its start learned moves faster than the fresh head (embedder/param_groups.py); missing: 1
    momentum: float = 0.9
    weight_decay: float = 5e-4
    log_ratio_eps: float = 1e-6
    label_floor: str = added_later(default="none")  # none | half_min | a number: the smallest label distance between
    # two different images (identical labels otherwise give the log-ratio log(eps) = -13.8: embedder/labels/floor.py)
    precision: str = "auto"  # auto | float32 | bfloat16: autocast the trunk; auto is bfloat16 where it is
    # native (GPUs, AVX-512 BF16 or AMX CPUs: capcore.cpu_isa), float32 elsewhere; head and loss stay float32
    batchnorm: str = "batch"  # batch | sync | frozen | per_process: under torchrun, batch shares the global batch's
    # statistics (SyncBatchNorm on CUDA; frozen running statistics on CPU/gloo, said in one line); sync insists on
    # SyncBatchNorm (CUDA only); frozen uses running statistics (eval-mode BN); per_process, each share's own
    ckpt_every: int = bookkeeping(50)  # steps between checkpoints (and at the end)
    log_every: int = bookkeeping(10)
    stop_after_steps: Optional[int] = bookkeeping(None)  # testing aid: die after this step like a kill (no checkpoint)
    sampler: str = added_later(default="anchors")  # anchors: Kim et al.'s anchor batches (embedder/sampler.py) |
    # g17_pool: Gordo & Larlus's triplets mined from a pool (train.pool; g17_hinge rows only; the same step count)
    pool: PoolConfig = added_later(default_factory=PoolConfig)


PRETRAIN_TARGETS = ("identity", "identity_shape", "attributes")
"""What the stand-in for ImageNet is told (embedder.pretrain says what each teaches)."""


@dataclass
class PretrainConfig:
    """Class pretraining, the stand-in for ImageNet (embedder.pretrain says what each target teaches)."""
    targets: str = "identity"  # identity: one kind (coloured shape) per object-centred crop, as ImageNet |
    # identity_shape: the shape alone | attributes: every attribute group the captions mention, multi-label (a
    # control: that stand-in has seen caption content); embedder.pretrain says why the kind includes the colour
    epochs: float = 3.0
    batch_size: int = 64
    lr: float = 1e-3
    weight_decay: float = 1e-4
    lr_decay: str = "none"  # none (constant lr) | cosine: anneal to 0 at the last step. Tried for a shorter demo
    # recipe: it did not bring the shapes within 4 epochs (configs/demo/demo_caption.yaml), so no shipped config sets it
    precision: str = "auto"  # auto | float32 | bfloat16: autocast the trunk (as train.precision)
    augment: bool = False  # random flips and quarter turns (the targets do not change under them)
    crop: Optional[int] = None  # train on object-centred crops of this many input pixels (embedder.pretrain.Views)
    data: Optional[DataConfig] = None  # a pretraining set of its own (ImageNet's part: larger than the caption
    # set, disjoint from it); null: the track's own training images. Its input size is the track's data.input_size
    ckpt_every: int = bookkeeping(50)
    stop_after_steps: Optional[int] = bookkeeping(None)  # testing aid: die after this step like a kill (no checkpoint)


@dataclass
class EvalConfig:
    query_split: str = "test"
    db_split: str = "train"
    k: int = 50  # largest K of the @K curves
    n_queries: Optional[int] = None  # subsample queries (deterministic); None = all


@dataclass
class Stage1Config(RunConfig):
    """A stage-one study (python -m embedder.rows) or one of its rows (python -m embedder.train): the
    track's data and labels, the neighbour graph, the network, the loop, the rows and their evaluation."""
    data: DataConfig = field(default_factory=DataConfig)
    graph: GraphConfig = field(default_factory=GraphConfig)
    captions: CaptionLabelConfig = field(default_factory=CaptionLabelConfig)
    model: ModelConfig = field(default_factory=ModelConfig)
    train: TrainConfig = field(default_factory=TrainConfig)
    eval: EvalConfig = bookkeeping(default_factory=EvalConfig)
    pretrain: PretrainConfig = field(default_factory=PretrainConfig)
    method: MethodConfig = bookkeeping(default_factory=MethodConfig)
    methods: list[MethodConfig] = bookkeeping(default_factory=list)  # a study trains each of these
    dims: list[int] = bookkeeping(default_factory=list)  # dimension sweep: every method at each of these


# The choices of every named setting, checked when a config loads (and used by the code that acts on them),
# so that a typo stops the run before a graph is built or a step is trained.
LAYOUT_LABELS = ("auto", "surfaces", "regions")
SPACES = ("wmd", "tfidf")
ARCHS = tuple(RESNETS)
"""The ResNets (embedder.backbones.RESNETS): resnet10 (one basic block per stage, half ResNet-18's step;
embedder.model.resnet10) is the CPU demo's trunk, without ImageNet weights; the others are torchvision's. Any other
name of the backbone table (timm:NAME, torchvision:NAME, a plugin's) names its own stages (check_other_backbone)."""
FREEZABLE = ("none", *RESNET_STAGES[:-1])
"""``train.freeze`` for a ResNet: the trunk up to and including this stage is cut off and its maps computed once."""
MININGS = ("dense", "binary")
DISTANCES = ("squared", "euclidean")
OPTIMIZERS = ("sgd", "adam")
BATCHNORMS = ("batch", "sync", "frozen", "per_process")
DEVICES = ("auto", "cpu", "cuda")
LR_STAGES = (*RESNET_STAGES, "head")
"""The keys of ``train.layer_lr``: the trunk's stages and the head (embedder.param_groups)."""


ROW_LABELS = ("real", "shuffled", "kinds", "self")
"""method.labels: what a row trains on (embedder/row_labels.py)."""
LABEL_FLOORS = ("none", "half_min")
"""train.label_floor's named settings; a positive number is the third kind (embedder/labels/floor.py)."""


def _positive_number(text: str) -> bool:
    try:
        return float(text) > 0
    except ValueError:
        return False


def check_other_backbone(cfg, c: ConfigChecks) -> None:
    """A trunk that is not a ResNet (timm:NAME, torchvision:NAME, a plugin's): a name the backbone table knows, with
    ``train.freeze`` and ``train.layer_lr`` naming its own stages (``embedder.backbones.stage_names``)."""
    try:
        stages = stage_names(cfg.model.arch)
    except CapawareError as err:
        c.need(False, "model.arch", err.problem, err.fix)
        return
    freezable = ("none", *stages[:-1])
    c.need(cfg.train.freeze in freezable, "train.freeze", f"{cfg.model.arch} has no stage {cfg.train.freeze!r} to "
           f"freeze up to", f"use one of {', '.join(freezable)}")
    unknown = sorted(set(cfg.train.layer_lr) - {*stages, "head"})
    c.need(not unknown, "train.layer_lr", f"{cfg.model.arch} has no stage {', '.join(unknown)}",
           f"use its stages ({', '.join(stages)}) or head")


def check(cfg, c: ConfigChecks) -> None:
    """Every value of a loaded stage-one config that no stage could use, into ``c``."""
    choice, positive = c.choice, c.positive
    choice("device", cfg.device, DEVICES)
    for prefix, data in (("data", cfg.data), ("pretrain.data", cfg.pretrain.data)):
        if data is None:
            continue
        choice(f"{prefix}.track", data.track, TRACKS)
        if data.track in TRACKS:
            choice(f"{prefix}.format", data.format, formats_of(data.track))
        choice(f"{prefix}.layout_labels", data.layout_labels, LAYOUT_LABELS)
        if data.synthetic is not None and data.synthetic.n_val is not None:
            c.need(data.track == "caption", f"{prefix}.synthetic.n_val", "only the caption generator has a val split "
                   "of its own", f"remove {prefix}.synthetic.n_val")
            c.at_least(f"{prefix}.synthetic.n_val", data.synthetic.n_val, 0)
        if data.synthetic is not None and data.synthetic.n_unlabeled:
            c.need(data.track == "caption", f"{prefix}.synthetic.n_unlabeled", "only the caption generator writes "
                   "unlabeled images", f"remove {prefix}.synthetic.n_unlabeled")
            c.at_least(f"{prefix}.synthetic.n_unlabeled", data.synthetic.n_unlabeled, 0)
        positive(f"{prefix}.input_size", data.input_size)
    choice("captions.space", cfg.captions.space, SPACES)
    if cfg.model.arch not in ARCHS:
        check_other_backbone(cfg, c)
    positive("model.embed_dim", cfg.model.embed_dim)
    t = cfg.train
    choice("train.optimizer", t.optimizer, OPTIMIZERS)
    choice("train.precision", t.precision, PRECISIONS)
    choice("train.batchnorm", t.batchnorm, BATCHNORMS)
    if cfg.model.arch in ARCHS:
        choice("train.freeze", t.freeze, FREEZABLE)
    c.need(t.label_floor in LABEL_FLOORS or _positive_number(t.label_floor), "train.label_floor",
           f"{t.label_floor!r} is neither none, half_min nor a positive number", "none, half_min or e.g. 0.05")
    choice("pretrain.precision", cfg.pretrain.precision, PRECISIONS)
    choice("pretrain.lr_decay", cfg.pretrain.lr_decay, ("none", "cosine"))
    choice("pretrain.targets", cfg.pretrain.targets, PRETRAIN_TARGETS)
    for key in ("batch_size", "anchors_per_batch", "epochs", "lr", "ckpt_every", "log_every"):
        positive(f"train.{key}", getattr(t, key))
    c.need(t.lr_end_fraction is None or 0 < t.lr_end_fraction <= 1, "train.lr_end_fraction",
           f"must be in (0, 1], got {t.lr_end_fraction}",
           "e.g. 0.2 (0.9 ** 15: where the paper's 15 epochs at 0.9 per epoch end), or null")
    c.at_least("train.jitter", t.jitter, 0.0)
    if t.jitter > 0 and t.freeze != "none" and cfg.model.arch in ARCHS:
        c.need(False, "train.jitter", f"jitters pixels, but train.freeze={t.freeze} trains on maps computed once "
               "per image", "set train.freeze=none, or train.jitter=0")
    for stage, scale in t.layer_lr.items():
        if cfg.model.arch in ARCHS:
            choice("train.layer_lr", stage, LR_STAGES)
        positive(f"train.layer_lr.{stage}", scale)
    if t.k >= t.batch_size:
        c.need(False, "train.k", f"{t.k} neighbours do not fit a batch of {t.batch_size} with their anchor",
               "set train.k < train.batch_size")
    positive("eval.k", cfg.eval.k)
    positive("graph.m", cfg.graph.m)
    check_sampler(c, t)
    for where, method in [("method", cfg.method)] + [(f"methods[{i}]", m) for i, m in enumerate(cfg.methods)]:
        check_method(c, where, method)
        c.need(not text_on(method.text) or cfg.captions.space == "tfidf", f"{where}.text",
               "the text losses (Eq. 2, 3) read the images' tf-idf caption bags", "set captions.space: tfidf")
    for d in cfg.dims:
        positive("dims", d)


@dataclass(frozen=True)
class RowSettings:
    """A row's settings after its overrides: ``methods[i].lr/epochs/anchors_per_batch/embed_dim`` where the row
    sets them, else ``train.*`` and ``model.embed_dim``. Resolved once (``row_settings``), read everywhere."""
    lr: float  # before train.layer_lr scales it per stage
    epochs: float
    anchors_per_batch: int
    embed_dim: int


def row_settings(cfg, method) -> RowSettings:
    pick = lambda own, default: own if own is not None else default  # noqa: E731
    return RowSettings(lr=pick(method.lr, cfg.train.lr), epochs=method.epochs or cfg.train.epochs,
                       anchors_per_batch=method.anchors_per_batch or cfg.train.anchors_per_batch,
                       embed_dim=method.embed_dim or cfg.model.embed_dim)


def check_sampler(c: ConfigChecks, t) -> None:
    """``train.sampler`` is known and its pool's sizes are positive (which loss it mines for: embedder.train)."""
    c.choice("train.sampler", t.sampler, SAMPLERS)
    for key in ("queries", "per_query", "per_pair", "refresh", "triplets"):
        c.positive(f"train.pool.{key}", getattr(t.pool, key))


def check_method(c: ConfigChecks, where: str, method) -> None:
    """One row: its loss is registered, and the settings that loss reads (its registry entry's ``fields`` and
    ``args``) hold values it can use; the overrides are positive where given."""
    c.choice(f"{where}.loss", method.loss, tuple(LOSSES))
    c.choice(f"{where}.mining", method.mining, MININGS)
    c.choice(f"{where}.labels", method.labels, ROW_LABELS)
    for key in ("lr", "epochs", "embed_dim", "anchors_per_batch"):
        c.positive(f"{where}.{key}", getattr(method, key), allow_none=True)
    if method.loss not in LOSSES:
        return
    entry = LOSSES[method.loss]
    for key in method.loss_args:
        c.need(key in entry.args, f"{where}.loss_args.{key}", f"is not a setting of the {method.loss} loss",
               f"use one of {', '.join(entry.args)}" if entry.args
               else "remove it: that loss has no settings of its own")
    for key in ("visual", "eq2", "eq3"):
        c.need(getattr(method.text, key) >= 0, f"{where}.text.{key}", "is negative", "a weight >= 0")
    c.need(method.text.visual > 0 or text_on(method.text), f"{where}.text", "every loss weight is 0", "set one above 0")
    c.positive(f"{where}.text.per_pair", method.text.per_pair)
    if "distance" in entry.fields:
        c.choice(f"{where}.distance", method.distance, DISTANCES)
    if "temperature" in entry.fields:
        c.positive(f"{where}.temperature", method.temperature)


def slug(name: str) -> str:
    """A row's folder name under ``methods/`` ("L(Log-ratio)+M(Dense)" -> "l_log_ratio_m_dense")."""
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


ROW_OVERRIDE = re.compile(r"^methods\.([^.=]+)\.([^=]+)=(.*)$", re.S)


def apply_row_overrides(cfg, overrides: list[str], where: str) -> None:
    """``methods.ROW.KEY=VALUE``: one row's setting from the command line. ROW is the row's place in
    ``methods`` (0, 1, ...) or its folder name (``l_log_ratio_m_dense``: ``slug`` of its name), so a sweep or
    a control changes one row's lr or epochs without a YAML file; the value is checked by the schema."""
    for item in overrides:
        row, key, value = ROW_OVERRIDE.match(item).groups()
        names = [slug(m.name) for m in cfg.methods]
        index = int(row) if row.isdigit() else names.index(row) if row in names else None
        if index is None or index >= len(cfg.methods):
            raise CapawareError(f"{where} + command line", f"{item}: no row {row!r} in methods",
                                f"name a row by its place (0..{len(names) - 1}) or its folder name: {', '.join(names)}")
        try:
            OmegaConf.update(cfg.methods[index], key, OmegaConf.from_dotlist([f"v={value}"]).v, merge=True)
        except OmegaConfBaseException as err:
            raise CapawareError(f"{where} + command line", f"{item}: {str(err).splitlines()[0]}",
                                "use a field of embedder.config.MethodConfig with a value of its type") from None


def load_config(path: str | Path | None, overrides: list[str] = (), schema: type = Stage1Config) -> Any:
    """A stage-one config (``capcore.config.load_schema`` onto ``Stage1Config`` unless told otherwise),
    every named setting checked against its choices (``check``): the first problem is one error line.
    ``methods.ROW.KEY=VALUE`` overrides one row (``apply_row_overrides``); ``methods=[{row: NAME, ...}]``
    on the command line expands its rows as a file's do."""
    rows = [o for o in overrides if ROW_OVERRIDE.match(o)]
    rest = [o for o in overrides if not ROW_OVERRIDE.match(o)]
    cfg = load_schema(path, rest, schema=schema, prepare=expand_rows)
    if rows:
        apply_row_overrides(cfg, rows, str(path or "<defaults>"))
    if schema is Stage1Config:
        checks = ConfigChecks(path, overrides)
        check(cfg, checks)
        checks.raise_first()
    return cfg
