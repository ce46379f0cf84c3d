"""Typed config of a captioner run (OmegaConf structured config, loaded by capcore.config.load_schema).

A YAML file (``configs/{demo,paper}/*_att2all2.yaml``, ``configs/{demo,paper}/*_topdown.yaml``) is merged onto these
dataclasses, then ``key=value`` overrides; an unknown or mistyped key names the key and the file. Every number the
training loop uses is here, so the config is the whole description of a run (nanoGPT style).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from capcore.config import PRECISIONS, ConfigChecks, RunConfig, load_schema
from capcore.fingerprint import added_later, bookkeeping
from capdata.captions import DEFAULT as DEFAULT_FORMAT, trainable_formats
from captioners.core_registry import CORES


@dataclass
class CapDataConfig:
    json: str = "data/synthetic/captions/dataset_coco.json"  # caption file: prepro input, validation refs
    format: str = added_later(default=DEFAULT_FORMAT)  # its caption format: a name of capdata.formats' table
    prepro_dir: str = "runs/demo/captions"  # vocab.json + labels.h5 (written by captioners.prepro if absent)
    word_count_threshold: int = 5  # prepro: words seen <= this many times in training captions -> UNK
    max_length: int = 16  # prepro: captions truncated to this many tokens
    features: str = "img"  # a name under features_dir (img -> img.h5), or a path to a feats.h5
    features_dir: str = "runs/demo/features"
    seq_per_img: int = 5  # captions per image in a batch (sampled with replacement if an image has fewer)
    in_memory: bool = bookkeeping(True)  # read the split's features into RAM once; else one HDF5 read per image
    num_workers: int = bookkeeping(0)  # DataLoader processes; each opens its own HDF5 handle once


@dataclass
class CapModelConfig:
    core: str = "att2all2"  # att2all2 (Rennie et al. 2017) | topdown (Anderson et al. 2018) | transformer
    # (Vaswani et al. 2017, as self-critical.pytorch's; captioners/transformer_core.py)
    rnn_size: int = 512  # LSTM hidden units (each LSTM of Top-Down); the Transformer's model width
    input_encoding_size: int = 512  # word embedding size
    att_hid_size: int = 512  # hidden size of the additive attention (the LSTM cores)
    drop_prob_lm: float = 0.5  # dropout on embeddings and LSTM output
    att_position: bool = False  # add a learned vector per grid cell to its embedded feature: the attention then
    # knows where a cell is (CNN features carry place only through padding effects); off in self-critical.pytorch
    standardise: bool = added_later(default=False)  # standardise att and fc per channel with the train split's
    # statistics, stored with the model and applied at caption time (feature sets differ in scale: issue #46)
    layers: int = added_later(default=2)  # the Transformer: encoder layers, and as many decoder layers
    heads: int = added_later(default=4)  # the Transformer: attention heads (rnn_size must divide by them)
    ff_size: int = added_later(default=512)  # the Transformer: hidden units of each feed-forward sublayer
    core_args: dict[str, float] = added_later(default_factory=dict)  # settings of the core's own, which its
    # registry entry names with defaults (captioners/core_registry.py); a user's core needs no field here


@dataclass
class CapLoopConfig:
    """What every captioner training loop (captioners.loop: XE and SCST) reads: the batches, Adam, the lr
    schedule, clipping, the plateau stop, precision and the bookkeeping. XE and SCST extend it."""
    batch_size: int = 16  # images per batch
    epochs: int = 20  # at most; with ``patience``, training stops earlier once val CIDEr-D stops rising
    patience: Optional[int] = None  # stop after this many validations without a new best val CIDEr-D
    lr: float = 5e-4  # Adam
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    weight_decay: float = 0.0
    lr_decay_start: int = 0  # epoch at which step decay starts; -1: constant lr
    lr_decay_every: int = 3  # epochs
    lr_decay_rate: float = 0.8
    lr_warmup_steps: int = 0  # the lr rises linearly from lr / N to lr over the first N steps (0: off). SCST
    # starts a fresh Adam on XE weights, whose first steps move every weight by about lr at once
    grad_clip_mode: str = "value"  # value: clamp each gradient entry (self-critical.pytorch) | norm | none
    grad_clip: float = 0.1
    precision: str = "auto"  # auto: bfloat16 autocast on a GPU, float32 on CPU | float32 | bfloat16
    compile: bool = False  # torch.compile the core (captioners/speed.py); pays off on long runs
    ckpt_every: int = bookkeeping(200)  # steps between resumable checkpoints (also at every epoch end)
    log_every: int = bookkeeping(25)  # steps between TensorBoard scalars
    stop_after_steps: Optional[int] = bookkeeping(None)  # testing aid: die after this step like a kill (no checkpoint)


@dataclass
class CapTrainConfig(CapLoopConfig):
    """Cross-entropy training: the loop's settings, each image bringing seq_per_img captions, plus
    scheduled sampling and label smoothing."""
    ss_start: int = -1  # scheduled sampling: first epoch (-1: off)
    ss_increase_every: int = 5  # epochs between increases of the sampling probability
    ss_increase_prob: float = 0.05
    ss_max_prob: float = 0.25
    label_smoothing: float = 0.0


@dataclass
class CapValConfig:
    split: str = "val"
    max_images: Optional[int] = None  # first N images of the split (deterministic); None: all
    beam_size: int = 1  # 1 = greedy (fast); the best checkpoint is chosen by CIDEr-D of these captions
    batch_size: int = bookkeeping(100)
    every_epochs: int = 1


@dataclass
class CaptionerConfig(RunConfig):
    """One captioner's cross-entropy training (python -m captioners.xe): the features and captions it
    reads, its core, the loop and how it is validated."""
    data: CapDataConfig = field(default_factory=CapDataConfig)
    model: CapModelConfig = field(default_factory=CapModelConfig)
    train: CapTrainConfig = field(default_factory=CapTrainConfig)
    val: CapValConfig = field(default_factory=CapValConfig)


CLIP_MODES = ("value", "norm", "none")


def load_captioner_config(path: str | Path | None, overrides: list[str] = ()) -> CaptionerConfig:
    """Load and validate; a bad value is one CapawareError naming the key and the file."""
    cfg = load_schema(path, overrides, schema=CaptionerConfig)
    c = ConfigChecks(path, overrides)
    c.choice("data.format", cfg.data.format, trainable_formats())
    c.choice("model.core", cfg.model.core, tuple(CORES))
    if cfg.model.core in CORES:
        entry = CORES[cfg.model.core]
        for key in cfg.model.core_args:
            c.need(key in entry.args, f"model.core_args.{key}", f"is not a setting of the {entry.name} core",
                   f"its settings: {', '.join(entry.args) or 'none'}")
        if entry.check is not None:
            entry.check(cfg, c)
    check_loop(cfg, c)
    for key in ("data.seq_per_img", "data.max_length", "model.rnn_size", "model.input_encoding_size",
                "model.att_hid_size"):
        section, name = key.split(".")
        c.at_least(key, cfg[section][name], 1)
    c.need(0.0 <= cfg.model.drop_prob_lm < 1.0, "model.drop_prob_lm", "must be in [0, 1)", "e.g. 0.5")
    c.need(0.0 <= cfg.train.label_smoothing < 1.0, "train.label_smoothing", "must be in [0, 1)", "e.g. 0.1")
    c.raise_first()
    return cfg


def check_loop(cfg, c: ConfigChecks) -> None:
    """The checks of what CapLoopConfig and CapValConfig hold, shared by the XE and SCST loaders."""
    t = cfg.train
    c.choice("train.grad_clip_mode", t.grad_clip_mode, CLIP_MODES)
    c.choice("train.precision", t.precision, PRECISIONS)
    for key in ("train.batch_size", "train.epochs", "train.ckpt_every", "train.log_every", "val.beam_size",
                "val.batch_size", "val.every_epochs"):
        section, name = key.split(".")
        c.at_least(key, cfg[section][name], 1)
    c.at_least("train.patience", t.patience, 1, allow_none=True)
    c.at_least("train.lr_warmup_steps", t.lr_warmup_steps, 0)
    c.need(len(t.betas) == 2, "train.betas", "must be two numbers", "e.g. [0.9, 0.999]")




def features_path(data: CapDataConfig) -> Path:
    """``features: img`` -> features_dir/img.h5; a value ending in .h5 is a path of its own."""
    if data.features.endswith((".h5", ".hdf5")):
        return Path(data.features)
    return Path(data.features_dir) / f"{data.features}.h5"
