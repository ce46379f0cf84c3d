"""Typed config of a joint-space run (``python -m capaware.stage joint CONFIG [key=value ...]``), an OmegaConf
structured config loaded by capcore.config.load_schema like every stage's.

The data section has the captioners' shape (``features`` a name under ``features_dir`` or a path to a feats.h5;
``prepro_dir`` the folder of XE's ``labels.h5`` and ``vocab.json``), so one override, ``data.features=<set>``,
points both stages at the same file. The defaults of the model, the loss and the loop are vsepp's (fartashf/vsepp:
a 1024-d space, 300-d words, VSE++ with margin .2, Adam at 2e-4, gradient norm clipped at 2, batches of 128).
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from capcore.config import ConfigChecks, RunConfig, load_schema
from capcore.fingerprint import bookkeeping
from capcore.run_layout import RunDir
from joint.losses.registry import LOSSES

PRECISIONS = ("float32",)
SOURCES = ("fc", "att")  # joint.image_encoder.SOURCES: that module imports torch, which reading a config must not


@dataclass
class JointDataConfig:
    features: str = "img"  # a name under features_dir (img -> img.h5), or a path to a feats.h5
    features_dir: str = "runs/demo/features"
    prepro_dir: str = "runs/demo/captions"  # labels.h5 + vocab.json, written by the captioners' XE (prepro)
    source: str = "fc"  # fc: the pooled vector | att: the grid, mean-pooled (joint.image_encoder)


@dataclass
class JointModelConfig:
    embed_dim: int = 1024  # the joint space
    word_dim: int = 300  # word vectors
    num_layers: int = 1  # GRU layers


@dataclass
class JointLossConfig:
    name: str = "vse_pp"  # a name of joint.losses.registry: vse0 | vse_pp | warmup
    margin: float = 0.2
    warmup_steps: int = 1000  # warmup only: VSE0 for this many steps, then VSE++


@dataclass
class JointTrainConfig:
    epochs: int = 30  # each epoch: every train image once, with one of its captions drawn at random
    batch_size: int = 128  # images (each with one caption): the negatives of each other
    lr: float = 2e-4  # Adam (vsepp's, for the summed loss)
    grad_clip: float = 2.0  # gradient norm (0: off)
    precision: str = "float32"
    ckpt_every: int = bookkeeping(200)  # steps between resumable checkpoints (also at every epoch end)
    log_every: int = bookkeeping(10)  # steps between TensorBoard scalars
    stop_after_steps: Optional[int] = bookkeeping(None)  # testing aid: die after this step like a kill


@dataclass
class JointEvalConfig:
    val_split: str = "val"  # best.pt: the epoch of the highest rsum on this split
    test_split: str = "test"  # the final R@K table
    fold_size: int = 1000  # vsepp's 1K folds, when the test split has at least this many images


@dataclass
class JointConfig(RunConfig):
    """One joint space's training: the features and captions it reads, the encoders, the loss, the loop."""
    data: JointDataConfig = field(default_factory=JointDataConfig)
    model: JointModelConfig = field(default_factory=JointModelConfig)
    loss: JointLossConfig = field(default_factory=JointLossConfig)
    train: JointTrainConfig = field(default_factory=JointTrainConfig)
    eval: JointEvalConfig = field(default_factory=JointEvalConfig)


def load_joint_config(path: str | Path | None, overrides: list[str] = ()) -> JointConfig:
    """Load and validate; a bad value is one CapawareError naming the key and the file."""
    cfg = load_schema(path, overrides, schema=JointConfig)
    c = ConfigChecks(path, overrides)
    c.choice("data.source", cfg.data.source, SOURCES)
    c.choice("loss.name", cfg.loss.name, tuple(LOSSES))
    c.choice("train.precision", cfg.train.precision, PRECISIONS)
    for key in ("model.embed_dim", "model.word_dim", "model.num_layers", "train.epochs", "train.batch_size",
                "train.ckpt_every", "train.log_every", "eval.fold_size"):
        section, name = key.split(".")
        c.at_least(key, cfg[section][name], 1)
    c.at_least("loss.warmup_steps", cfg.loss.warmup_steps, 0)
    c.at_least("loss.margin", cfg.loss.margin, 0.0)
    c.at_least("train.grad_clip", cfg.train.grad_clip, 0.0)
    c.positive("train.lr", cfg.train.lr)
    c.raise_first()
    return cfg


def features_path(data: JointDataConfig) -> Path:
    """``features: img`` -> features_dir/img.h5; a value ending in .h5 is a path of its own (as the captioners')."""
    if data.features.endswith((".h5", ".hdf5")):
        return Path(data.features)
    return Path(data.features_dir) / f"{data.features}.h5"


def loss_args(cfg: JointConfig) -> dict[str, float]:
    """The loss section's settings that the configured loss takes (vse0 and vse_pp have no warm-up)."""
    given = {"margin": float(cfg.loss.margin), "warmup_steps": int(cfg.loss.warmup_steps)}
    return {k: v for k, v in given.items() if k in LOSSES[cfg.loss.name].args}


def results_paths(cfg: JointConfig) -> tuple[Path, Path]:
    """(metrics JSON, Markdown table) of a run: ``results/joint/<out_dir's name>.{json,md}`` in the run folder."""
    folder = RunDir(cfg.run_dir).results("joint")
    name = Path(cfg.out_dir).name
    return folder / f"{name}.json", folder / f"{name}.md"
