"""Cross-entropy training of a captioner: ``python -m captioners.xe --config FILE [key=value ...]``.

The XE step: teacher-forced log-probs of the batch's reference captions (optionally with scheduled
sampling) -> masked cross-entropy. The loop around it (resume, checkpoints, validation with CIDEr-D,
lr schedule, clipping, early stopping) is captioners/loop.py, shared with self-critical training;
its docstring lists the files written under ``out_dir``.

Under ``torchrun`` (capcore/distributed.py) every process walks the same global batches and trains
on its share of each (``ShardedBatches``) inside DDP; the loss is the sum over the process's words
divided by the number of words in the whole global batch (times the world size, which DDP's gradient
average divides out), so a step is the one-process step of the same batch. Rank 0 alone validates and
writes; dropout and scheduled sampling draw per-process, per-step seeded streams
(``distributed.rank_seed``), so those runs match one process in distribution, not draw for draw.
"""
from __future__ import annotations

from pathlib import Path

import torch
from omegaconf import OmegaConf

from capcore import distributed
from capcore.config import config_hash
from capcore.device import autocast, pick_device, precision_choice
from capcore.errors import run_cli
from capcore.fingerprint import run_fingerprint
from captioners.card import CaptionerCard
from captioners.config import CaptionerConfig, features_path, load_captioner_config
from captioners.core_registry import core_args
from captioners.data import CaptionDataset, on_device
from captioners.model import Captioner, caption_mask, xe_loss
from captioners.prepro import ensure_prepro, read_labels, read_vocab
from captioners.speed import apply_compile
from captioners.loop import Recipe, StepContext, StepResult, StopRequested, fit, training_main
from captioners.validation import validation_refs
from feature_extract.stats import channel_stats

__all__ = ["train", "StopRequested"]

# scheduled sampling: the chance of feeding the model its own previous word instead of the reference's at an
# epoch; 0 while train.ss_start is negative or not yet reached, then ss_increase_prob more every
# ss_increase_every epochs, capped at ss_max_prob
def ss_prob_at(t, epoch: int) -> float:
    if t.ss_start < 0 or epoch < t.ss_start:
        return 0.0
    return min(t.ss_increase_prob * ((epoch - t.ss_start) // t.ss_increase_every), t.ss_max_prob)


def xe_recipe(cfg: CaptionerConfig, model: Captioner, device: torch.device, dtype) -> Recipe:
    t = cfg.train
    ss_prob = 0.0

    def begin_epoch(epoch: int) -> None:
        nonlocal ss_prob
        ss_prob = ss_prob_at(t, epoch)

    def step(batch: dict, ctx: StepContext) -> StepResult:
        model.train()
        seq = batch["labels"].to(device)
        with autocast(device, dtype):
            logp = ctx.net(*on_device(batch, device), seq, ss_prob)
        words = seq.view(-1, seq.size(-1))
        loss = xe_loss(logp.float(), words, t.label_smoothing)
        if ctx.world > 1:  # this share's word sum over the global batch's word count (module docstring)
            count = caption_mask(words).sum().to(loss.dtype) * float(ctx.batches.real[ctx.index])
            loss = loss * count * ctx.world / distributed.all_sum(count)
        value = (distributed.all_sum(loss.detach()) / ctx.world).item()  # the global batch's loss, every rank
        return StepResult(loss, {"train_loss": value}, {"loss": value, "lr": ctx.lr, "ss_prob": ss_prob},
                          {"loss": value})

    def summary(h: dict) -> str:
        return "train loss " + (f"{h['train_loss']:.3f}" if h["train_loss"] is not None else "-")

    return Recipe("captioner", step, ("train_loss",), "train", summary=summary, begin_epoch=begin_epoch)


def train(cfg: CaptionerConfig, progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished); returns the path of best.pt."""
    device = pick_device(cfg.device)
    dtype, precision = precision_choice(cfg.train.precision, device, auto_on_cpu=False)
    distributed.init(device)
    with distributed.rank_zero_first():  # rank 0 alone writes labels.h5 / vocab.json when missing
        labels_path, vocab_path = ensure_prepro(cfg.data)
    labels, vocab = read_labels(labels_path), read_vocab(vocab_path)
    feats = features_path(cfg.data)
    torch.manual_seed(cfg.seed)
    d = cfg.data
    train_set = CaptionDataset(feats, labels, "train", d.seq_per_img, d.in_memory, cfg.seed)
    val_set = CaptionDataset(feats, labels, cfg.val.split, d.seq_per_img, d.in_memory, cfg.seed, cfg.val.max_images)
    refs = validation_refs(d.json, labels, val_set, vocab, d.format)
    info = train_set.info
    args = dict(core=cfg.model.core, vocab_size=len(vocab) - 1, fc_feat_size=info.fc_dim,
                att_feat_size=info.att_shape[1], input_encoding_size=cfg.model.input_encoding_size,
                rnn_size=cfg.model.rnn_size, att_hid_size=cfg.model.att_hid_size, drop_prob_lm=cfg.model.drop_prob_lm,
                att_cells=info.att_shape[0] if cfg.model.att_position else 0)
    own = core_args(cfg.model)  # the Transformer's layers, heads and ff_size (the LSTM cores have none)
    if own:
        args["core_args"] = own
    if cfg.model.standardise:
        args["standardise"] = True
    model = Captioner(**args)
    if cfg.model.standardise:  # a resumed run loads the same statistics from its checkpoint
        model.set_input_stats(**vars(channel_stats(feats, train_set.rows)))
    model = model.to(device)
    if cfg.train.compile:
        apply_compile(model)
    card = CaptionerCard(model_args=args, vocab=vocab, max_length=labels.max_length, features=str(feats.resolve()),
                         labels=str(labels_path.resolve()), config=OmegaConf.to_yaml(cfg, resolve=True),
                         config_hash=config_hash(cfg), stage="xe", precision=precision,
                         fingerprint=run_fingerprint(cfg), att_grid=list(info.grid))
    return fit(cfg, xe_recipe(cfg, model, device, dtype), model, train_set, val_set, refs, vocab,
               labels.max_length, card, device, progress)


def main(argv: list[str] | None = None) -> None:
    training_main(load_captioner_config, train, __doc__, argv)


if __name__ == "__main__":
    run_cli(main)
