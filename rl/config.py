"""Typed config of a self-critical (SCST) run (OmegaConf structured config via embedder.config.load_config).

The model comes from the XE checkpoint named by ``init`` (captioners' best.pt): its architecture is not
configurable here. ``data`` is the captioners' own section, so ``data.features=cap`` picks the Cap
features exactly as for XE, and the ``init`` / ``out_dir`` interpolations keep Img and Cap runs apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from capcore.config import load_config
from capcore.device import PRECISIONS
from capcore.errors import CapawareError
from capcore.fingerprint import bookkeeping
from captioners.config import CapDataConfig, CapValConfig


@dataclass
class SCSTTrainConfig:
    batch_size: int = 32  # images per batch; each brings samples_per_image sampled captions
    epochs: int = 30
    lr: float = 5e-4  # Adam
    betas: list[float] = field(default_factory=lambda: [0.9, 0.999])
    eps: float = 1e-8
    weight_decay: float = 0.0
    lr_decay_start: int = -1  # RL epoch at which step decay starts; -1: constant lr
    lr_decay_every: int = 3
    lr_decay_rate: float = 0.8
    grad_clip_mode: str = "value"  # value (self-critical.pytorch) | norm | none
    grad_clip: float = 0.1
    samples_per_image: int = 5  # multinomial samples per image
    baseline: str = "greedy"  # greedy: reward of the eval-mode greedy caption (Rennie et al.) | mean: of the others
    temperature: float = 1.0  # sampling temperature (1: the policy itself)
    xe_weight: float = 0.0  # mixed objective (Paulus et al. 2018): loss = SCST + xe_weight * XE on the references
    sample_dropout: bool = True  # sample in train mode (dropout on, self-critical.pytorch) | false: eval mode
    # best.pt only from validations whose val distinct captions keep at least this share of the XE
    # start's (the collapse guard, rl/train.py); 0: off, best val CIDEr-D alone (the paper)
    keep_distinct: float = 0.0
    keep_bleu4: float = 0.0  # and whose val BLEU-4 keeps this share of the start's (0: off)
    max_length: Optional[int] = None  # words per sampled caption; None: the labels' max_length
    precision: str = "auto"  # auto: bfloat16 autocast on a GPU, float32 on CPU | float32 | bfloat16
    compile: bool = False  # torch.compile the core (captioners/speed.py); pays off on long runs
    ckpt_every: int = bookkeeping(200)  # steps between resumable checkpoints (also at every epoch end)
    log_every: int = bookkeeping(25)  # steps between TensorBoard scalars
    stop_after_steps: Optional[int] = bookkeeping(None)  # testing aid: die after this step like a kill (no checkpoint)


@dataclass
class RewardConfig:
    df_split: str = "train"  # document frequencies from this split's references (labels.h5)
    df_cache: Optional[str] = bookkeeping(None)  # None: <prepro_dir>/cider_df_<split>.h5
    sigma: float = 6.0  # CIDEr-D length penalty
    eos: bool = True  # the end token is a word of the reward, as self-critical.pytorch has it (rl/cider.py)
    bleu4_weight: float = 0.0  # reward = CIDEr-D + this x sentence BLEU-4 (self-critical's bleu_reward_weight)


@dataclass
class SCSTConfig:
    name: str = bookkeeping("demo_att2all2_scst")
    seed: int = 0
    device: str = bookkeeping("auto")  # auto | cpu | cuda
    init: str = bookkeeping("runs/demo/captioners/img_att2all2/best.pt")  # the XE checkpoint to start from
    run_dir: str = bookkeeping("runs/demo")  # the run folder; configs put every output under ${run_dir}
    out_dir: str = bookkeeping("runs/demo/captioners/img_att2all2_scst")
    data: CapDataConfig = field(default_factory=CapDataConfig)
    train: SCSTTrainConfig = field(default_factory=SCSTTrainConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    val: CapValConfig = field(default_factory=CapValConfig)


BASELINES = ("greedy", "mean")
CLIP_MODES = ("value", "norm", "none")


def load_scst_config(path: str | Path | None, overrides: list[str] = ()) -> SCSTConfig:
    """Load and validate; a bad value is one CapawareError naming the key and the file."""
    cfg = load_config(path, overrides, schema=SCSTConfig)
    where = str(path) if path else "<defaults>"

    def need(ok: bool, key: str, problem: str, fix: str) -> None:
        if not ok:
            raise CapawareError(where, f"{key}: {problem}", fix)

    t = cfg.train
    need(t.baseline in BASELINES, "train.baseline", f"{t.baseline!r} unknown", f"use one of {BASELINES}")
    need(t.grad_clip_mode in CLIP_MODES, "train.grad_clip_mode", f"{t.grad_clip_mode!r} unknown",
         f"use one of {CLIP_MODES}")
    need(t.baseline != "mean" or t.samples_per_image >= 2, "train.samples_per_image",
         "the mean baseline needs at least 2 samples per image", "set train.samples_per_image >= 2")
    need(cfg.train.xe_weight >= 0, "train.xe_weight", f"{cfg.train.xe_weight} is negative",
         "use 0 (pure SCST, the paper) or a positive weight of the XE term")
    for key in ("train.batch_size", "train.epochs", "train.samples_per_image", "train.ckpt_every", "train.log_every",
                "val.beam_size", "val.batch_size", "val.every_epochs"):
        section, name = key.split(".")
        need(cfg[section][name] >= 1, key, f"{cfg[section][name]} must be >= 1", f"set {key} >= 1")
    need(t.temperature > 0, "train.temperature", "must be > 0", "e.g. 1.0")
    for key in ("keep_distinct", "keep_bleu4"):
        need(0 <= t[key] <= 1, f"train.{key}", f"{t[key]} is not a share", "use 0 (off) to 1, e.g. 0.8")
    need(t.max_length is None or t.max_length >= 1, "train.max_length", "must be >= 1 or null", "e.g. 16")
    need(cfg.reward.sigma > 0, "reward.sigma", "must be > 0", "CIDEr-D uses 6.0")
    need(cfg.reward.bleu4_weight >= 0, "reward.bleu4_weight", f"{cfg.reward.bleu4_weight} is negative",
         "use 0 (CIDEr-D alone) or a positive weight")
    need(len(t.betas) == 2, "train.betas", "must be two numbers", "e.g. [0.9, 0.999]")
    need(bool(cfg.init), "init", "empty", "point init at the best.pt of python -m captioners.train")
    need(t.precision in PRECISIONS, "train.precision", f"{t.precision!r} unknown", f"use one of {PRECISIONS}")
    return cfg
