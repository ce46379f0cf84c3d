"""Self-critical training of an XE captioner: ``python -m rl.train --config FILE [key=value ...]``.

One screen of loop: seeded epoch batches -> baseline (greedy caption in eval mode, or the mean of the
other samples) -> ``samples_per_image`` multinomial samples per image with their log-probabilities ->
CIDEr-D rewards (rl/cider.py, training-set document frequencies) -> loss -(r - b) log p -> gradient
clipping -> Adam. Validation as in XE (val CIDEr-D of greedy captions, pycocoevalcap), also before
the first RL step, so ``best.pt`` is never worse on val than the XE checkpoint it started from.
Outputs under ``out_dir``, the same files as captioners.train (``best.pt`` is read by
captioners.decode)::

    best.pt  last.pt (resumable: optimizer, step, torch + sampling RNG, history)  history.json
    config.yaml  tb/ (scst/reward, scst/baseline, scst/advantage, scst/advantage_abs, scst/loss, val/cider_d,
                     val/unique_captions, val/novel_captions, val/vocab_size, val/mean_length)
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
from torch.utils.tensorboard import SummaryWriter
from tqdm import tqdm

from capcore import distributed
from capcore.atomic import write_text
from capcore.checkpoint import file_sha256, load_checkpoint, save_checkpoint
from capcore.config import config_hash
from capcore.device import autocast, pick_device, pick_precision
from capcore.errors import CapawareError, run_cli
from captioners.config import features_path
from captioners.data import CaptionDataset, EpochBatches, loader, steps_per_epoch
from captioners.discriminative import discriminativeness
from captioners.model import build_captioner, xe_loss
from captioners.prepro import decode_sequence, read_labels, read_vocab
from captioners.train import (
    StopRequested,
    cider_d,
    ensure_prepro,
    generate,
    lr_at,
    validation_refs,
)
from rl.cider import CiderReward, load_or_build_doc_freq
from rl.config import SCSTConfig, load_scst_config
from rl.scst import baseline, greedy_captions, sample_captions, scst_loss


def run_fingerprint(cfg, init_sha256: str) -> str:
    """What determines the weights: the config minus where/how often to write, plus the XE weights."""
    c = OmegaConf.to_container(cfg, resolve=True)
    for key in ("stop_after_steps", "ckpt_every", "log_every"):
        c["train"].pop(key)
    for key in ("out_dir", "name", "device", "init"):
        c.pop(key)
    for key in ("num_workers", "in_memory"):
        c["data"].pop(key)
    c["val"].pop("batch_size")
    c["reward"].pop("df_cache")
    c["init_sha256"] = init_sha256
    return config_hash(OmegaConf.create(c))


def load_init(cfg: SCSTConfig, labels_path: Path, feats: Path, vocab: list[str]) -> dict:
    """The XE checkpoint, checked against this run's labels, vocabulary and features."""
    init = Path(cfg.init)
    fix = (f"train it first (scripts/stage3_captioners.sh with the matching XE config and "
           f"data.features={cfg.data.features}), or point init at its best.pt")
    if not init.is_file():
        raise CapawareError(init, "XE checkpoint not found", fix)
    ckpt = load_checkpoint(init)
    if "model_args" not in ckpt or "model" not in ckpt:
        raise CapawareError(init, "not a captioner checkpoint (no model_args)", "pass captioners.train's best.pt")
    if list(ckpt["vocab"]) != vocab or Path(ckpt["labels"]) != labels_path.resolve():
        raise CapawareError(init, f"trained on the labels {ckpt['labels']}, not on {labels_path.resolve()}",
                            "use the data.prepro_dir the XE run used, or its matching checkpoint")
    if Path(ckpt["features"]) != feats.resolve():
        raise CapawareError(init, f"trained on the features {ckpt['features']}, but data.features gives "
                            f"{feats.resolve()}", fix)
    return ckpt


def train(cfg: SCSTConfig, progress: bool = True) -> Path:
    """Train (or resume, or notice it is finished); returns the path of best.pt."""
    out, t, d = Path(cfg.out_dir), cfg.train, cfg.data
    if distributed.launched():
        raise CapawareError("rl.train", "self-critical training runs in one process (no DDP yet)",
                            "start python -m rl.train without torchrun")
    labels_path, vocab_path = ensure_prepro(d)
    labels, vocab = read_labels(labels_path), read_vocab(vocab_path)
    feats = features_path(d)
    device = pick_device(cfg.device)
    dtype = pick_precision(t.precision, device)
    xe = load_init(cfg, labels_path, feats, vocab)
    init_sha = file_sha256(cfg.init)
    torch.manual_seed(cfg.seed)
    model = build_captioner(dict(xe["model_args"])).to(device)
    model.load_state_dict(xe["model"])
    opt = torch.optim.Adam(model.parameters(), lr=t.lr, betas=tuple(t.betas), eps=t.eps, weight_decay=t.weight_decay)
    sampler = torch.Generator(device=device).manual_seed(cfg.seed)
    reward = CiderReward(labels, load_or_build_doc_freq(labels_path, cfg.reward.df_split, cfg.reward.df_cache),
                         cfg.reward.sigma)
    train_set = CaptionDataset(feats, labels, "train", d.seq_per_img, d.in_memory, cfg.seed)
    val_set = CaptionDataset(feats, labels, cfg.val.split, d.seq_per_img, d.in_memory, cfg.seed, cfg.val.max_images)
    refs = validation_refs(d.json, labels, val_set, vocab)
    # novelty on val is measured against the training captions as the model sees them (labels.h5)
    seen = [decode_sequence(vocab, s) for i in np.flatnonzero(labels.splits == "train") for s in labels.captions_of(i)]
    n, max_len = t.samples_per_image, t.max_length or labels.max_length
    per_epoch = steps_per_epoch(len(train_set), t.batch_size)
    total = t.epochs * per_epoch
    fingerprint = run_fingerprint(cfg, init_sha)

    last, best_path = out / "last.pt", out / "best.pt"
    step, best, history = 0, -math.inf, []
    stats = {"reward": [], "baseline": [], "advantage": [], "advantage_abs": [], "xe": []}  # per step, this epoch
    if last.is_file():
        state = load_checkpoint(last)
        if state["fingerprint"] != fingerprint:
            raise CapawareError(last, "checkpoint belongs to another config or another XE checkpoint",
                                "delete the run folder or choose another out_dir")
        model.load_state_dict(state["model"])
        opt.load_state_dict(state["optimizer"])
        torch.set_rng_state(state["torch_rng"])
        sampler.set_state(state["sample_rng"])
        if device.type == "cuda" and "cuda_rng" in state:
            torch.cuda.set_rng_state(state["cuda_rng"])
        step, best, history = int(state["step"]), float(state["best_cider"]), list(state["history"])
        stats = {"xe": [], **{k: [float(x) for x in v] for k, v in state["epoch_stats"].items()}}
        if state["done"]:
            print(f"scst {cfg.name}: already trained ({step} steps, best CIDEr-D {best:.3f}) -> {best_path}")
            return best_path
    out.mkdir(parents=True, exist_ok=True)
    write_text(out / "config.yaml", OmegaConf.to_yaml(cfg, resolve=True))
    shared = {"model_args": dict(xe["model_args"]), "vocab": vocab, "max_length": labels.max_length,
              "features": str(feats.resolve()), "labels": str(labels_path.resolve()),
              "config": OmegaConf.to_yaml(cfg, resolve=True), "config_hash": config_hash(cfg), "stage": "rl",
              "att_grid": list(xe.get("att_grid", [])), "fingerprint": fingerprint,
              "init": str(Path(cfg.init).resolve()), "init_sha256": init_sha}

    def checkpoint(done: bool) -> None:
        state = {"model": model.state_dict(), "optimizer": opt.state_dict(), "torch_rng": torch.get_rng_state(),
                 "sample_rng": sampler.get_state(), "step": step, "best_cider": best, "history": history,
                 "epoch_stats": stats, "done": done, **shared}
        if device.type == "cuda":
            state["cuda_rng"] = torch.cuda.get_rng_state()
        save_checkpoint(state, last)

    writer = SummaryWriter(str(out / "tb"), purge_step=step + 1)  # scalars at ``step`` came before its checkpoint

    def validate(epoch: int, lr: float) -> None:
        nonlocal best
        preds, _ = generate(model, val_set, vocab, device, cfg.val.batch_size, labels.max_length,
                            "beam" if cfg.val.beam_size > 1 else "greedy", cfg.val.beam_size)
        score, _ = cider_d(preds, refs)
        disc = discriminativeness(list(preds.values()), seen)
        mean = {k: float(np.mean(v)) if v else None for k, v in stats.items()}
        history.append({"epoch": epoch, "step": step, "cider_d": score, "lr": lr, **mean,
                        **{k: disc[k] for k in ("unique_captions", "novel_captions", "vocab_size", "mean_length")}})
        writer.add_scalar("val/cider_d", score, step)
        for k in ("unique_captions", "novel_captions", "vocab_size", "mean_length"):
            writer.add_scalar(f"val/{k}", disc[k], step)
        first = next(iter(preds.items()))
        tqdm.write(f"{cfg.name} epoch {epoch}: val CIDEr-D {score:.3f} ({len(preds)} images), unique "
                   f"{disc['unique_captions']:.0%}, e.g. {first[0]}: {first[1]!r}")
        for v in stats.values():
            v.clear()
        if score > best:
            best = score
            save_checkpoint({"model": model.state_dict(), "epoch": epoch, "step": step, "val_cider": score, **shared},
                            best_path)

    if step == 0 and not history:  # the XE starting point: RL must beat it to replace best.pt
        validate(0, t.lr)
        checkpoint(done=False)
        write_text(out / "history.json", json.dumps(history, indent=1))
    bar = tqdm(total=total, initial=step, desc=cfg.name, disable=not progress)
    while step < total:
        epoch, start = divmod(step, per_epoch)
        lr = lr_at(t, epoch)
        for group in opt.param_groups:
            group["lr"] = lr
        for batch in loader(train_set, EpochBatches(len(train_set), t.batch_size, cfg.seed, epoch, start),
                            d.num_workers):
            fc, att = batch["fc"].to(device), batch["att"].to(device)
            label_ix = train_set.label_ix[batch["index"].numpy()]
            B = len(label_ix)
            model.train(t.sample_dropout)
            with autocast(device, dtype):
                greedy = greedy_captions(model, fc, att, max_len) if t.baseline == "greedy" else None
                dec = sample_captions(model, fc, att, n, max_len, t.temperature, sampler)
            greedy_r = reward(greedy, label_ix) if greedy is not None else None
            r = reward(dec.seq, np.repeat(label_ix, n)).reshape(B, n)
            base = baseline(t.baseline, r, greedy_r)
            loss = scst_loss(dec.logprob, r, base)
            if t.xe_weight > 0:  # mixed objective: keep the references' likelihood while chasing the reward
                seq = batch["labels"].to(device)
                with autocast(device, dtype):
                    logp = model(fc, att, seq)
                xe = xe_loss(logp.float(), seq.view(-1, seq.size(-1)))
                stats["xe"].append(xe.item())
                loss = loss + t.xe_weight * xe
            opt.zero_grad(set_to_none=True)
            loss.backward()
            if t.grad_clip_mode == "value":
                torch.nn.utils.clip_grad_value_(model.parameters(), t.grad_clip)
            elif t.grad_clip_mode == "norm":
                torch.nn.utils.clip_grad_norm_(model.parameters(), t.grad_clip)
            opt.step()
            step += 1
            for key, value in (("reward", r.mean()), ("baseline", base.mean()), ("advantage", (r - base).mean()),
                               ("advantage_abs", np.abs(r - base).mean())):  # the mean baseline's mean advantage is 0
                stats[key].append(float(value))
            bar.update(1)
            if step % t.log_every == 0:
                for key in stats:
                    if stats[key]:
                        writer.add_scalar(f"scst/{key}", stats[key][-1], step)
                writer.add_scalar("scst/loss", loss.item(), step)
                writer.add_scalar("scst/lr", lr, step)
                writer.add_scalar("scst/sample_length", float((dec.seq > 0).sum(1).float().mean()), step)
                bar.set_postfix(reward=f"{r.mean():.3f}", best=f"{max(best, 0):.3f}")
            if step % per_epoch == 0:
                break  # epoch end: validate before the checkpoint, so a resume never skips it
            if step % t.ckpt_every == 0:
                checkpoint(done=False)
            if t.stop_after_steps is not None and step >= t.stop_after_steps:
                raise StopRequested(step)  # like a kill: what came after the last checkpoint is lost
        epoch += 1
        if epoch % cfg.val.every_epochs == 0 or step == total:
            validate(epoch, lr)
        checkpoint(done=step == total)
        write_text(out / "history.json", json.dumps(history, indent=1))
        if t.stop_after_steps is not None and step >= t.stop_after_steps and step < total:
            raise StopRequested(step)
    bar.close()
    writer.close()
    print(f"scst {cfg.name}: {step} steps from {cfg.init}, best val CIDEr-D {best:.3f} -> {best_path}")
    for h in history:
        r, b, a = ("-" if h.get(k) is None else f"{h[k]:.3f}" for k in ("reward", "baseline", "advantage_abs"))
        print(f"  epoch {h['epoch']:3d}  val CIDEr-D {h['cider_d']:.3f}  unique {h['unique_captions']:.0%}  "
              f"train reward {r}  baseline {b}  |r - b| {a}  lr {h['lr']:.2e}")
    return best_path


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_scst_config(args.config, args.overrides)
    try:
        train(cfg)
    except StopRequested:
        os._exit(3)  # simulate a kill: no cleanup, no final files


if __name__ == "__main__":
    run_cli(main)
