"""Self-critical training of an XE captioner: ``python -m rl.scst --config FILE [key=value ...]``.

The SCST step (``scst_recipe``) inside the loop that cross-entropy training shares
(captioners/loop.py: resume, checkpoints, validation with pycocoevalcap's CIDEr-D, lr schedule,
clipping). Validation also runs before the first RL step, so ``best.pt`` is never worse on val than the
XE checkpoint it started from. With ``train.keep_distinct`` > 0 a validation becomes best.pt only if
its distinct val captions keep that share of the XE start's (``train.keep_bleu4``: and its val BLEU-4):
SCST on the demo buys CIDEr-D by writing one safe caption for more and more images, and these are the
checks that stop it, on val. Outputs under ``out_dir``, the same files as captioners.xe
(``best.pt`` is read by captioners.predict); TensorBoard: scst/reward, scst/baseline, scst/advantage,
scst/advantage_abs, scst/xe, scst/loss, scst/sample_length, val/cider_d, val/unique_captions,
val/distinct_captions, val/novel_captions, val/vocab_size, val/mean_length, val/bad_endings,
val/bleu4. The run's SCST signature
(rl/signature.py: EOS in the reward or not, baseline, samples, document frequencies, XE weight) is on
its checkpoints and manifest.json, and captioners.predict carries it to the predictions' meta.

Under ``torchrun`` each process takes its share of every global batch (as in XE); the sampling noise
is drawn for the whole global batch on every process (rl/scst_loss.py), rewards and baselines are per
image, and the loss is this share's sum over the global batch's sample (and word) count, with the
gradients averaged over processes: a step is the one-process step of the same batch (no DDP wrapper,
since sampling calls the model's step function directly, not its forward).
"""
from __future__ import annotations

from dataclasses import replace
from functools import partial
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from capcore import distributed
from capcore.checkpoint import file_sha256, load_checkpoint
from capcore.config import config_hash
from capcore.device import autocast, pick_device, precision_choice
from capcore.errors import CapawareError, run_cli
from capcore.fingerprint import run_fingerprint
from captioners.card import CaptionerCard
from captioners.config import features_path
from captioners.data import CaptionDataset, on_device
from captioners.discriminative import discriminativeness
from captioners.model import build_captioner, caption_mask, xe_loss
from captioners.prepro import decode_sequence, ensure_prepro, read_labels, read_vocab
from captioners.speed import apply_compile
from captioners.loop import Recipe, StepContext, StepResult, StopRequested, fit, training_main
from captioners.validation import corpus_bleu4, validation_refs
from joint.loading import weights_sha256
from rl.cider import load_or_build_doc_freq
from rl.config import SCSTConfig, load_scst_config
from rl.rewards import Captions, Reward, RewardInputs, StepImages
from rl.scst_loss import baseline, greedy_captions, sample_captions, scst_loss
from rl.signature import references_sha256, signature_of
from rl.unlabeled import UnlabeledPool, load_pool, with_unlabeled

__all__ = ["train", "StopRequested"]  # the simulated kill, for the tests that catch it

# the caption diversity measures (captioners/discriminative.py) that each validation logs beside CIDEr-D and
# BLEU-4 (describe_val); the collapse guard (eligible) reads distinct_captions among them
DIVERSITY = ("unique_captions", "distinct_captions", "novel_captions", "vocab_size", "mean_length", "bad_endings")


def load_init(cfg: SCSTConfig, labels_path: Path, feats: Path, vocab: list[str]) -> dict:
    """The XE checkpoint, checked against this run's labels, vocabulary and features."""
    init = Path(cfg.init)
    fix = (f"train it first (scripts/stage3_captioners.sh with the matching XE config and "
           f"data.features={cfg.data.features}), or point init at its best.pt")
    if not init.is_file():
        raise CapawareError(init, "XE checkpoint not found", fix)
    ckpt = load_checkpoint(init)
    card = CaptionerCard.of(ckpt, init)
    if "model" not in ckpt:
        raise CapawareError(init, "captioner checkpoint without weights", "pass captioners.xe's best.pt")
    if list(card.vocab) != vocab or Path(card.labels) != labels_path.resolve():
        raise CapawareError(init, f"trained on the labels {card.labels}, not on {labels_path.resolve()}",
                            "use the data.prepro_dir the XE run used, or its matching checkpoint")
    if Path(card.features) != feats.resolve():
        raise CapawareError(init, f"trained on the features {card.features}, but data.features gives "
                            f"{feats.resolve()}", fix)
    return ckpt


def global_share(ctx: StepContext, local_images: int) -> tuple[np.ndarray, int, float]:
    """This process's images' positions in the global batch, the global batch's size, and 1.0 (0.0 for
    the stand-in a process gets when the batch has no image for it; data.ShardedBatches)."""
    if ctx.world == 1:
        return np.arange(local_images), local_images, 1.0
    size, rank = ctx.batches.sizes[ctx.index], distributed.rank()
    if not ctx.batches.real[ctx.index]:
        return np.zeros(local_images, dtype=int), size, 0.0
    return np.arange(rank, size, ctx.world), size, 1.0


def describe_val(preds: dict[int, str], seen: list[str], refs: dict[int, list[str]]) -> tuple[dict, str]:
    """Besides val CIDEr-D: diversity against the training captions, and corpus BLEU-4."""
    disc = discriminativeness(list(preds.values()), seen)
    extra = {**{k: disc[k] for k in DIVERSITY}, "bleu4": corpus_bleu4(preds, refs)}
    return extra, (f", BLEU-4 {extra['bleu4']:.3f}, unique {disc['unique_captions']:.0%}, distinct "
                   f"{disc['distinct_captions']:.0%}")


def scst_summary(h: dict) -> str:
    r, b, a = ("-" if h.get(k) is None else f"{h[k]:.3f}" for k in ("reward", "baseline", "advantage_abs"))
    return (f"unique {h['unique_captions']:.0%}  distinct {h['distinct_captions']:.0%}  train reward {r}  "
            f"baseline {b}  |r - b| {a}")


def eligible(h: dict, start: dict, t) -> bool:
    """The collapse guard: SCST raises CIDEr-D on the demo by writing the same safe caption for more
    and more images, and by trading n-gram precision for it; such a validation may not become
    best.pt (train.keep_distinct, train.keep_bleu4)."""
    return (h["distinct_captions"] >= t.keep_distinct * start["distinct_captions"]
            and h["bleu4"] >= t.keep_bleu4 * start["bleu4"])


def scst_recipe(cfg: SCSTConfig, model, train_set: CaptionDataset, reward: Reward, seen: list[str],
                max_len: int, device: torch.device, dtype, refs: dict[int, list[str]],
                pool: UnlabeledPool | None = None) -> Recipe:
    """The SCST step: unlabeled images join the batch (``pool``, rl/unlabeled.py) -> baseline (greedy caption in
    eval mode, or the mean of the other samples) -> ``samples_per_image`` multinomial samples per image with their
    log-probabilities -> rewards (rl/rewards.py: CIDEr-D with training-set document frequencies, and the terms the
    config adds) -> loss -(r - b) log p (+ ``xe_weight`` x XE on the labeled images' references)."""
    t, n = cfg.train, cfg.train.samples_per_image
    sampler = torch.Generator(device=device).manual_seed(cfg.seed)

    def step(batch: dict, ctx: StepContext) -> StepResult:
        fc, att = on_device(batch, device)
        labeled = train_set.label_ix[batch["index"].numpy()]
        fc, att, label_ix = with_unlabeled(pool, fc, att, labeled, train_set.labels, device)
        B = len(label_ix)  # labeled images first, then the pool's
        positions, global_images, real = global_share(ctx, B)
        model.train(t.sample_dropout)
        with autocast(device, dtype):
            greedy = greedy_captions(model, fc, att, max_len) if t.baseline == "greedy" else None
            dec = sample_captions(model, fc, att, n, max_len, t.temperature, sampler, positions,
                                   global_images)
        groups = [Captions(dec.seq, np.repeat(label_ix, n), np.repeat(np.arange(B), n))]
        if greedy is not None:
            groups.append(Captions(greedy, label_ix, np.arange(B)))
        rewards, shares = reward.together(*groups, images=StepImages(fc, att))
        r = rewards[0].reshape(B, n)
        base = baseline(t.baseline, r, rewards[1] if greedy is not None else None)
        rows = None if ctx.world == 1 else global_images * n / ctx.world  # DDP-style: averaged grads
        loss = scst_loss(dec.logprob, r, base, rows) * real
        # (the mean baseline's mean advantage is 0)
        sums = [r.sum(), base.sum(), (r - base).sum(), np.abs(r - base).sum()]
        totals = distributed.all_sum(torch.tensor(sums + [r.size], dtype=torch.float64) * real).tolist()
        stats = dict(zip(("reward", "baseline", "advantage", "advantage_abs"), (v / totals[-1] for v in totals[:-1])))
        stats.update(shares if ctx.world == 1 else {})  # each term's share, on one process (a log, not the loss)
        if t.xe_weight > 0:  # mixed objective: keep the references' likelihood while chasing the reward
            seq = batch["labels"].to(device)
            with autocast(device, dtype):
                logp = model(fc[:len(labeled)], att[:len(labeled)], seq)
            words = seq.view(-1, seq.size(-1))
            xe = xe_loss(logp.float(), words)
            if ctx.world > 1:  # as in XE under torchrun: this share's word sum over the global word count
                count = caption_mask(words).sum().to(xe.dtype) * real
                xe = xe * count * ctx.world / distributed.all_sum(count)
            stats["xe"] = (distributed.all_sum(xe.detach()) / ctx.world).item()
            loss = loss + t.xe_weight * xe
        scalars = {**stats, "loss": (distributed.all_sum(loss.detach()) / ctx.world).item(), "lr": ctx.lr,
                   "sample_length": float((dec.seq > 0).sum(1).float().mean())}
        return StepResult(loss, stats, scalars, {"reward": stats["reward"]})

    stat_names = ("reward", "baseline", "advantage", "advantage_abs", "xe", *reward.stat_names())
    return Recipe("scst", step, stat_names, "scst",
                  validate_first=True, describe_val=partial(describe_val, seen=seen, refs=refs), summary=scst_summary,
                  eligible=partial(eligible, t=t) if t.keep_distinct > 0 or t.keep_bleu4 > 0 else None,
                  rngs={"sample_rng": sampler, **({"unlabeled_rng": pool.generator} if pool else {})},
                  other_start=" or another XE checkpoint", ddp=False)


def train(cfg: SCSTConfig, progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished); returns the path of best.pt."""
    d = cfg.data
    device = pick_device(cfg.device)
    distributed.init(device)
    with distributed.rank_zero_first():  # rank 0 alone writes labels.h5, vocab.json, the df cache
        labels_path, vocab_path = ensure_prepro(d)
        doc_freq = load_or_build_doc_freq(labels_path, cfg.reward.df_split, cfg.reward.df_cache, eos=cfg.reward.eos)
    labels, vocab = read_labels(labels_path), read_vocab(vocab_path)
    feats = features_path(d)
    dtype, precision = precision_choice(cfg.train.precision, device, auto_on_cpu=False)
    xe = load_init(cfg, labels_path, feats, vocab)
    xe_card = CaptionerCard.of(xe, cfg.init)
    init_sha = file_sha256(cfg.init)
    torch.manual_seed(cfg.seed)
    model = build_captioner(dict(xe_card.model_args)).to(device)
    model.load_state_dict(xe["model"])
    if cfg.train.compile:
        apply_compile(model)
    train_set = CaptionDataset(feats, labels, "train", d.seq_per_img, d.in_memory, cfg.seed)
    val_set = CaptionDataset(feats, labels, cfg.val.split, d.seq_per_img, d.in_memory, cfg.seed, cfg.val.max_images)
    refs = validation_refs(d.json, labels, val_set, vocab, d.format)
    # novelty on val is measured against the training captions as the model sees them (labels.h5)
    seen = [decode_sequence(vocab, s) for i in np.flatnonzero(labels.splits == "train") for s in labels.captions_of(i)]
    reward = Reward.of(RewardInputs(cfg, labels, doc_freq, feats, vocab_path, len(vocab) - 1, train_set.info.fc_dim,
                                    device))
    joint_sha = weights_sha256(cfg.retrieval.model) if cfg.retrieval.weight > 0 else None  # read once it loaded
    fingerprint = run_fingerprint(cfg, {"init_sha256": init_sha} if joint_sha is None else
                                  {"init_sha256": init_sha, "joint_sha256": joint_sha})
    signature = str(signature_of(cfg, references_sha256(labels), joint_sha))
    card = CaptionerCard(model_args=dict(xe_card.model_args), vocab=vocab, max_length=labels.max_length,
                         features=str(feats.resolve()), labels=str(labels_path.resolve()),
                         config=OmegaConf.to_yaml(cfg, resolve=True), config_hash=config_hash(cfg), stage="rl",
                         precision=precision, fingerprint=fingerprint, att_grid=list(xe_card.att_grid),
                         init=str(Path(cfg.init).resolve()), init_sha256=init_sha, scst_signature=signature)
    joint = getattr(reward.terms.get("self_retrieval"), "model", None)
    pool = load_pool(cfg.retrieval, train_set.info, joint, device, cfg.seed)
    if pool is not None and distributed.world_size() > 1:
        raise CapawareError("retrieval.unlabeled", "unlabeled images are not shared out under torchrun yet",
                            "train self-retrieval SCST with unlabeled images on one process")
    recipe = scst_recipe(cfg, model, train_set, reward, seen, cfg.train.max_length or labels.max_length, device, dtype,
                         refs, pool)
    if cfg.train.init_optimizer:
        if "optimizer" not in xe:
            raise CapawareError(cfg.init, "this XE checkpoint holds no optimizer state",
                                "retrain it with python -m captioners.xe, or set train.init_optimizer=false")
        recipe = replace(recipe, optimizer_start=xe["optimizer"])
    return fit(cfg, recipe, model, train_set, val_set, refs, vocab, labels.max_length, card, device, progress)


def main(argv: list[str] | None = None) -> None:
    training_main(load_scst_config, train, __doc__, argv)


if __name__ == "__main__":
    run_cli(main)
