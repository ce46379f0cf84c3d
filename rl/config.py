"""Typed config of a self-critical (SCST) run (OmegaConf structured config via capcore.config.load_schema).

The model comes from the XE checkpoint named by ``init`` (captioners' best.pt): its architecture is not
configurable here. ``data`` is the captioners' own section, so ``data.features=cap`` picks the Cap
features exactly as for XE, and the ``init`` / ``out_dir`` interpolations keep Img and Cap runs apart.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Optional

from capcore.config import ConfigChecks, RunConfig, load_schema
from capcore.fingerprint import added_later, bookkeeping
from captioners.config import CapDataConfig, CapLoopConfig, CapValConfig, check_loop


@dataclass
class SCSTTrainConfig(CapLoopConfig):
    """The captioner loop's settings (captioners.config.CapLoopConfig) with SCST's defaults, plus sampling,
    the baseline, the mixed objective and the collapse guard."""
    batch_size: int = 32  # images per batch; each brings samples_per_image sampled captions
    epochs: int = 30
    lr_decay_start: int = -1  # RL epoch at which step decay starts; -1: constant lr (self-critical.pytorch)
    samples_per_image: int = 5  # multinomial samples per image
    baseline: str = "greedy"  # greedy: reward of the eval-mode greedy caption (Rennie et al.) | mean: of the others
    temperature: float = 1.0  # sampling temperature (1: the policy itself)
    xe_weight: float = 0.0  # mixed objective (Paulus et al. 2018): loss = SCST + xe_weight * XE on the references
    sample_dropout: bool = True  # sample in train mode (dropout on, self-critical.pytorch) | false: eval mode
    # best.pt only from validations whose val distinct captions keep at least this share of the XE
    # start's (the collapse guard, rl/scst.py); 0: off, best val CIDEr-D alone (the paper)
    keep_distinct: float = 0.0
    keep_bleu4: float = 0.0  # and whose val BLEU-4 keeps this share of the start's (0: off)
    max_length: Optional[int] = None  # words per sampled caption; None: the labels' max_length
    # start Adam from the XE best.pt's moments (self-critical.pytorch loads its XE optimizer with
    # --start_from) instead of fresh ones, whose first steps move every weight by about lr at once
    init_optimizer: bool = False


@dataclass
class RewardConfig:
    df_split: str = "train"  # document frequencies from this split's references (labels.h5)
    df_cache: Optional[str] = bookkeeping(None)  # None: <prepro_dir>/cider_df_<split>.h5
    sigma: float = 6.0  # CIDEr-D length penalty
    eos: bool = True  # the end token is a word of the reward, as self-critical.pytorch has it (rl/cider.py)
    bleu4_weight: float = 0.0  # reward = CIDEr-D + this x sentence BLEU-4 (self-critical's bleu_reward_weight)


@dataclass
class RetrievalRewardConfig:
    """Self-retrieval (Liu et al. 2018): a frozen joint space scores how well each sampled caption retrieves its own
    image among the step's images; ``weight`` (their alpha) times minus that hinge joins the reward (rl/rewards.py).
    Unlabeled images (a features file of images without captions) join each batch and earn that term alone."""
    weight: float = 0.0  # alpha; 0: off (no joint model is read). The paper: 1
    model: str = ""  # the joint stage's best.pt, e.g. ${run_dir}/joint/${data.features}/best.pt
    loss: str = "vse_pp"  # vse_pp: the hardest negative's hinge (the paper's Eq. 4) | vse0: every negative's, summed
    margin: float = 0.2
    unlabeled: str = ""  # a features file of unlabeled images (stage two on images.folder); "": none
    unlabeled_ratio: float = 1.0  # unlabeled images per labeled image of a batch (the paper: 1)
    # moderately hard negatives: each labeled image brings unlabeled ones ranked [lo, hi) by similarity to one of
    # its reference captions in the joint space (0-based ranks; the paper: [100, 1000] of COCO's 123K);
    # [0, 0]: drawn uniformly from the pool
    window: list[int] = field(default_factory=lambda: [0, 0])


RETRIEVAL_LOSSES = ("vse_pp", "vse0")


@dataclass
class SCSTConfig(RunConfig):
    """Self-critical fine-tuning of one XE captioner (python -m rl.scst): the checkpoint it starts from
    (its architecture comes with it), the same data section as XE, the loop, the reward and validation."""
    init: str = bookkeeping("runs/demo/captioners/img_att2all2/best.pt")  # the XE checkpoint to start from
    data: CapDataConfig = field(default_factory=CapDataConfig)
    train: SCSTTrainConfig = field(default_factory=SCSTTrainConfig)
    reward: RewardConfig = field(default_factory=RewardConfig)
    val: CapValConfig = field(default_factory=CapValConfig)
    retrieval: RetrievalRewardConfig = added_later(default_factory=RetrievalRewardConfig)


BASELINES = ("greedy", "mean")


def load_scst_config(path: str | Path | None, overrides: list[str] = ()) -> SCSTConfig:
    """Load and validate; a bad value is one CapawareError naming the key and the file."""
    cfg = load_schema(path, overrides, schema=SCSTConfig)
    c = ConfigChecks(path, overrides)
    t = cfg.train
    check_loop(cfg, c)
    c.choice("train.baseline", t.baseline, BASELINES)
    c.need(t.baseline != "mean" or t.samples_per_image >= 2, "train.samples_per_image",
           "the mean baseline needs at least 2 samples per image", "set train.samples_per_image >= 2")
    c.need(t.xe_weight >= 0, "train.xe_weight", f"{t.xe_weight} is negative",
           "use 0 (pure SCST, the paper) or a positive weight of the XE term")
    c.at_least("train.samples_per_image", t.samples_per_image, 1)
    c.need(t.temperature > 0, "train.temperature", "must be > 0", "e.g. 1.0")
    for key in ("keep_distinct", "keep_bleu4"):
        c.need(0 <= t[key] <= 1, f"train.{key}", f"{t[key]} is not a share", "use 0 (off) to 1, e.g. 0.8")
    c.at_least("train.max_length", t.max_length, 1, allow_none=True)
    c.need(cfg.reward.sigma > 0, "reward.sigma", "must be > 0", "CIDEr-D uses 6.0")
    c.need(cfg.reward.bleu4_weight >= 0, "reward.bleu4_weight", f"{cfg.reward.bleu4_weight} is negative",
           "use 0 (CIDEr-D alone) or a positive weight")
    check_retrieval(cfg.retrieval, c)
    c.need(bool(cfg.init), "init", "empty", "point init at the best.pt of python -m captioners.xe")
    c.raise_first()
    return cfg


def check_retrieval(r: RetrievalRewardConfig, c: ConfigChecks) -> None:
    c.need(r.weight >= 0, "retrieval.weight", f"{r.weight} is negative", "use 0 (off) or alpha > 0 (the paper: 1)")
    c.need(r.weight > 0 or not r.unlabeled, "retrieval.unlabeled", "unlabeled images earn only the retrieval "
           "reward, which retrieval.weight = 0 turns off", "set retrieval.weight > 0, or retrieval.unlabeled=''")
    if r.weight == 0:
        return
    c.need(bool(r.model), "retrieval.model", "empty while retrieval.weight > 0",
           "point it at the joint stage's best.pt, e.g. ${run_dir}/joint/${data.features}/best.pt")
    c.choice("retrieval.loss", r.loss, RETRIEVAL_LOSSES)
    c.need(r.margin >= 0, "retrieval.margin", f"{r.margin} is negative", "the paper's margin is 0.2")
    c.need(r.unlabeled_ratio > 0, "retrieval.unlabeled_ratio", f"{r.unlabeled_ratio} is not positive",
           "e.g. 1.0 (one unlabeled image per labeled one), or retrieval.unlabeled='' for none")
    window = list(r.window)
    c.need(len(window) == 2 and 0 <= window[0] <= window[-1], "retrieval.window",
           f"{window} is not [lo, hi] with 0 <= lo <= hi",
           "e.g. [10, 100] (ranks among the pool), or [0, 0] for uniform draws")
