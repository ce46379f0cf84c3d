"""Cross-entropy training of a captioner: ``python -m captioners.train --config FILE [key=value ...]``.

One screen of loop (nanoGPT style): seeded epoch batches -> teacher-forced log-probs (optionally with
scheduled sampling) -> masked XE -> gradient clipping -> Adam; the lr steps down by ``lr_decay_rate``
every ``lr_decay_every`` epochs. After each epoch the validation images are decoded and scored with
CIDEr-D; the best one is kept as ``best.pt``, and with ``train.patience`` training stops once that many
validations bring no new best (the val curve is in ``history.json`` and TensorBoard's val/cider_d).
``last.pt`` (atomic, RNG states included) lets a killed run resume to the same weights as an
uninterrupted one. Outputs, all under ``out_dir``::

    best.pt       weights + model_args + vocabulary + data paths + stage "xe": what captioners.decode needs
    last.pt       resumable training state (optimizer, step, RNG, best score, history)
    history.json  per validation: epoch, step, CIDEr-D, mean train loss, lr
    config.yaml   the merged config;  tb/  TensorBoard scalars

Under ``torchrun`` (capcore/distributed.py) every process walks the same global batches and trains
on its share of each (``ShardedBatches``) inside DDP; the loss is the sum over the process's words
divided by the number of words in the whole global batch (times the world size, which DDP's gradient
average divides out), so a step is the one-process step of the same batch. Rank 0 alone validates and
writes; dropout and scheduled sampling draw per-process, per-step seeded streams
(``distributed.rank_seed``), so those runs match one process in distribution, not draw for draw.
"""
from __future__ import annotations

import argparse
import json
import math
import os
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf
from tqdm import tqdm

from capcore import distributed
from capcore.atomic import write_text
from capcore.checkpoint import load_checkpoint, save_checkpoint
from capcore.config import config_hash
from capcore.device import autocast, pick_device, pick_precision
from capcore.errors import CapawareError, run_cli
from capdata.readers.karpathy import read_karpathy
from captioners.config import CaptionerConfig, features_path, load_captioner_config
from captioners.data import (
    CaptionDataset,
    EpochBatches,
    ShardedBatches,
    eval_batches,
    loader,
    steps_per_epoch,
)
from captioners.decoding import decode
from captioners.model import Captioner, caption_mask, xe_loss
from captioners.prepro import Labels, decode_sequence, prepro, read_labels, read_vocab


class StopRequested(Exception):
    """Raised after ``train.stop_after_steps`` (the CLI turns it into an abrupt exit, like a kill)."""


def ensure_prepro(data) -> tuple[Path, Path]:
    """labels.h5 + vocab.json under prepro_dir, written from data.json on first use; settings must agree."""
    out = Path(data.prepro_dir)
    labels, vocab = out / "labels.h5", out / "vocab.json"
    if not (labels.is_file() and vocab.is_file()):
        summary = prepro(data.json, out, data.word_count_threshold, data.max_length)
        print(f"prepro: {summary['vocab_size']} words, {summary['captions']} captions -> {out}")
    meta = json.loads(vocab.read_text())
    source = meta.get("source")
    if source and data.json and Path(data.json).is_file() and Path(source) != Path(data.json).resolve():
        raise CapawareError(vocab, f"made from {source}, but data.json is {data.json}",
                            f"delete {out} (it is rewritten) or point data.prepro_dir elsewhere")
    if (meta.get("word_count_threshold"), meta.get("max_length")) != (data.word_count_threshold, data.max_length):
        raise CapawareError(vocab, f"written with threshold {meta.get('word_count_threshold')}, max_length "
                            f"{meta.get('max_length')}; the config asks {data.word_count_threshold}, {data.max_length}",
                            f"delete {out} (it is rewritten) or make data.word_count_threshold/max_length agree")
    return labels, vocab


def validation_refs(json_path: str, labels: Labels, dataset: CaptionDataset, vocab: list[str]) -> dict[int, list[str]]:
    """Reference captions of the validation images: the json's full token lists (not the truncated,
    UNK-mapped labels) when the json is there; the labels otherwise."""
    ids = set(int(i) for i in dataset.image_ids)
    if json_path and Path(json_path).is_file():

        rec = read_karpathy(json_path)
        return {int(i): [" ".join(t) for t in caps] for i, caps in zip(rec.image_ids, rec.captions) if int(i) in ids}
    return {int(labels.image_ids[j]): [decode_sequence(vocab, s) for s in labels.captions_of(j)]
            for j in dataset.label_ix}


def cider_d(preds: dict[int, str], refs: dict[int, list[str]]) -> tuple[float, np.ndarray]:
    """CIDEr-D (pycocoevalcap's Cider: clipped counts, Gaussian length penalty, sigma 6; document
    frequencies from these references) on already tokenised, lower-case captions."""
    from pycocoevalcap.cider.cider_scorer import CiderScorer

    scorer = CiderScorer(n=4, sigma=6.0)
    for image_id, caption in preds.items():
        scorer += (caption, refs[image_id])
    score, scores = scorer.compute_score()
    return float(score), scores


@torch.no_grad()
def generate(model: Captioner, dataset: CaptionDataset, vocab: list[str], device, batch_size: int = 100,
             max_len: int = 16, method: str = "greedy", beam_size: int = 1, temperature: float = 1.0,
             generator=None, keep_attention: bool = False, progress: bool = False):
    """Captions for every image of ``dataset``: {image_id: caption}, and attention rows if asked."""
    model.eval()
    preds, attention = {}, []
    batches = eval_batches(len(dataset), batch_size)
    for batch in tqdm(loader(dataset, batches), total=len(batches), desc="decode", disable=not progress, leave=False):
        dec = decode(model, batch["fc"].to(device), batch["att"].to(device), method, beam_size, max_len,
                     temperature, generator)
        for k, image_id in enumerate(batch["image_id"].tolist()):
            preds[image_id] = decode_sequence(vocab, dec.seq[k].tolist())
            if keep_attention:
                attention.append((image_id, dec.seq[k].cpu().numpy(), dec.alpha[k].float().cpu().numpy()))
    return preds, attention


def run_fingerprint(cfg) -> str:
    """What determines the weights: everything except where to write and how often to log."""
    c = OmegaConf.to_container(cfg)
    for key in ("stop_after_steps", "ckpt_every", "log_every"):
        c["train"].pop(key)
    for key in ("out_dir", "name", "device"):
        c.pop(key)
    c["data"].pop("num_workers")
    c["data"].pop("in_memory")
    c["val"].pop("batch_size")
    return config_hash(OmegaConf.create(c))


def lr_at(t, epoch: int) -> float:
    if t.lr_decay_start < 0 or epoch < t.lr_decay_start:
        return t.lr
    return t.lr * t.lr_decay_rate ** ((epoch - t.lr_decay_start) // t.lr_decay_every)


def ss_prob_at(t, epoch: int) -> float:
    if t.ss_start < 0 or epoch < t.ss_start:
        return 0.0
    return min(t.ss_increase_prob * ((epoch - t.ss_start) // t.ss_increase_every), t.ss_max_prob)


def plateaued(history: list[dict], patience: int | None) -> bool:
    """True once the last ``patience`` validations brought no new best val CIDEr-D (None: never)."""
    if patience is None or not history:
        return False
    scores = [h["cider_d"] for h in history]
    return len(scores) - 1 - int(np.argmax(scores)) >= patience


def train(cfg: CaptionerConfig, progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished); returns the path of best.pt."""
    out, t = Path(cfg.out_dir), cfg.train
    device = pick_device(cfg.device)
    dtype = pick_precision(t.precision, device)
    world, rank = distributed.init(device), distributed.rank()
    rank0 = rank == 0
    with distributed.rank_zero_first():  # rank 0 alone writes labels.h5 / vocab.json when missing
        labels_path, vocab_path = ensure_prepro(cfg.data)
    labels, vocab = read_labels(labels_path), read_vocab(vocab_path)
    feats = features_path(cfg.data)
    torch.manual_seed(cfg.seed)
    d = cfg.data
    train_set = CaptionDataset(feats, labels, "train", d.seq_per_img, d.in_memory, cfg.seed)
    val_set = CaptionDataset(feats, labels, cfg.val.split, d.seq_per_img, d.in_memory, cfg.seed, cfg.val.max_images)
    refs = validation_refs(d.json, labels, val_set, vocab)
    info = train_set.info
    args = dict(core=cfg.model.core, vocab_size=len(vocab) - 1, fc_feat_size=info.fc_dim,
                att_feat_size=info.att_shape[1], input_encoding_size=cfg.model.input_encoding_size,
                rnn_size=cfg.model.rnn_size, att_hid_size=cfg.model.att_hid_size, drop_prob_lm=cfg.model.drop_prob_lm)
    model = Captioner(**args).to(device)
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)
    per_epoch = steps_per_epoch(len(train_set), t.batch_size)
    total = t.epochs * per_epoch
    fingerprint = run_fingerprint(cfg)

    last, best_path = out / "last.pt", out / "best.pt"
    step, best, history, resumed_losses = 0, -math.inf, [], []
    if last.is_file():
        state = load_checkpoint(last)
        if state["fingerprint"] != fingerprint:
            raise CapawareError(last, "checkpoint belongs to another config",
                                "delete the run folder or choose another out_dir")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        if device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"])
        step, best, history = int(state["step"]), float(state["best_cider"]), list(state["history"])
        resumed_losses = [float(x) for x in state["epoch_losses"]]
        if state["done"]:
            if rank0:
                print(f"captioner {cfg.name}: already trained ({step} steps, best CIDEr-D {best:.3f}) -> {best_path}")
            return best_path
    if rank0:
        out.mkdir(parents=True, exist_ok=True)
        write_text(out / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    shared = {"model_args": args, "vocab": vocab, "max_length": labels.max_length, "features": str(feats.resolve()),
              "labels": str(labels_path.resolve()), "config": OmegaConf.to_yaml(cfg, resolve=True),
              "config_hash": config_hash(cfg), "stage": "xe",
              "att_grid": list(info.grid), "fingerprint": fingerprint}

    def checkpoint(done: bool) -> None:
        if not rank0:
            return
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                 "step": step, "best_cider": best, "history": history, "epoch_losses": losses, "done": done,
                 **shared}
        if device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state()
        save_checkpoint(state, last)

    # scalars up to ``step`` were logged before its checkpoint: a resume hides only later ones
    writer = distributed.summary_writer(str(out / "tb"), purge_step=step + 1)
    bar = tqdm(total=total, initial=step, desc=cfg.name, disable=not (progress and rank0))
    losses: list[float] = resumed_losses
    net = distributed.wrap(model, device)
    while step < total:
        epoch, start = divmod(step, per_epoch)
        lr, ss_prob = lr_at(t, epoch), ss_prob_at(t, epoch)
        for group in opt.param_groups:
            group["lr"] = lr
        batches = EpochBatches(len(train_set), t.batch_size, cfg.seed, epoch, start)
        if world > 1:
            batches = ShardedBatches(batches, rank, world)
        for i, batch in enumerate(loader(train_set, batches, d.num_workers)):
            model.train()
            if world > 1:
                torch.manual_seed(distributed.rank_seed(cfg.seed, step))
            seq = batch["labels"].to(device)
            with autocast(device, dtype):
                logp = net(batch["fc"].to(device), batch["att"].to(device), seq, ss_prob)
            words = seq.view(-1, seq.size(-1))
            loss = xe_loss(logp.float(), words, t.label_smoothing)
            if world > 1:  # this share's word sum over the global batch's word count (module docstring)
                count = caption_mask(words).sum().to(loss.dtype) * float(batches.real[i])
                loss = loss * count * world / distributed.all_sum(count)
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if t.grad_clip_mode == "value":
                torch.nn.utils.clip_grad_value_(model.parameters(), t.grad_clip)
            elif t.grad_clip_mode == "norm":
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            opt.step()
            step += 1
            value = (distributed.all_sum(loss) / world).item()  # the global batch's loss on every rank
            losses.append(value)
            bar.update(1)
            if step % t.log_every == 0:
                writer.add_scalar("train/loss", value, step)
                writer.add_scalar("train/lr", lr, step)
                writer.add_scalar("train/ss_prob", ss_prob, step)
                bar.set_postfix(loss=f"{value:.3f}", best=f"{max(best, 0):.3f}")
            if step % per_epoch == 0:
                break  # epoch end: validate before the checkpoint, so a resume never skips it
            if step % t.ckpt_every == 0:
                checkpoint(done=False)
            if t.stop_after_steps is not None and step >= t.stop_after_steps:
                distributed.barrier()  # no process dies (and makes torchrun stop rank 0) mid-write
                raise StopRequested(step)  # like a kill: what came after the last checkpoint is lost
        epoch += 1
        if rank0 and (epoch % cfg.val.every_epochs == 0 or step == total):
            preds, _ = generate(model, val_set, vocab, device, cfg.val.batch_size, labels.max_length,
                                "beam" if cfg.val.beam_size > 1 else "greedy", cfg.val.beam_size)
            score, _ = cider_d(preds, refs)
            history.append({"epoch": epoch, "step": step, "cider_d": score, "lr": lr,
                            "train_loss": float(np.mean(losses)) if losses else None})
            writer.add_scalar("val/cider_d", score, step)
            first = next(iter(preds.items()))
            tqdm.write(f"{cfg.name} epoch {epoch}: val CIDEr-D {score:.3f} ({len(preds)} images), "
                       f"e.g. {first[0]}: {first[1]!r}")
            losses = []
            if score > best:
                best = score
                save_checkpoint({"model": model.state_dict(), "epoch": epoch, "step": step, "val_cider": score,
                                 **shared}, best_path)
        stopped = rank0 and plateaued(history, t.patience)
        if world > 1:  # every process stops together: rank 0's decision, summed over processes
            stopped = bool(distributed.all_sum(torch.tensor(float(stopped), device=device)).item() > 0)
        checkpoint(done=step == total or stopped)
        if rank0:
            write_text(out / "history.json", json.dumps(history, indent=1))
        distributed.barrier()  # the others wait for rank 0's validation and checkpoint
        if stopped:
            if rank0:
                tqdm.write(f"{cfg.name}: val CIDEr-D has not risen for {t.patience} validations; stopping at "
                           f"epoch {epoch} of {t.epochs}")
            break
        if t.stop_after_steps is not None and step >= t.stop_after_steps and step < total:
            raise StopRequested(step)
    bar.close()
    writer.close()
    if not rank0:
        return best_path
    print(f"captioner {cfg.name}: {step} steps, best val CIDEr-D {best:.3f} -> {best_path}")
    for h in history:
        loss = f"{h['train_loss']:.3f}" if h["train_loss"] is not None else "-"
        print(f"  epoch {h['epoch']:3d}  val CIDEr-D {h['cider_d']:.3f}  train loss {loss}  lr {h['lr']:.2e}")
    return best_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_captioner_config(args.config, args.overrides)
    try:
        train(cfg)
    except StopRequested:
        os._exit(3)  # simulate a kill: no cleanup, no final files
    distributed.shutdown()


if __name__ == "__main__":
    run_cli(main)
