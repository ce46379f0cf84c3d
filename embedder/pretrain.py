"""Class-pretrained backbone: the embedded default's stand-in for ImageNet.

It plays ImageNet's part twice, as in the paper: the initialisation of the caption-aware embedder, and
the "Img" feature baseline of stages two and three. What it is told decides what the Img <-> Cap swap
can show, so ``pretrain.targets`` names it:

- ``identity`` (the default): ImageNet's kind of supervision. Object-centred crops (ImageNet's photos
  are object-centric), one label per crop: the kind of the object nearest its centre, trained with
  softmax cross-entropy. No count, size, position or background target. The kind is the coloured shape
  ("red circle", 36 kinds). ImageNet's classes are hardly ever defined by colour, yet ImageNet-trained
  networks learn colour-specific filters from their first layer on; on this synthetic world, where colour is independent
  of shape, colour did not emerge without being named: told the shape alone (``identity_shape``), a linear probe read
  the colours of the caption set's images at .09 (majority answer .07), and the captioners on those
  features fell to 19-42% distinct captions (README, *The embedded default*).
- ``identity_shape``: the kind is the shape alone (six kinds); the colour-blind variant measured above.
- ``attributes`` (a control): multi-label BCE on every attribute group the captions mention (shape,
  colour, shape+colour object, size, count, background; ``scene_attributes``), falling back to the
  per-image ``categories`` on a caption set without attributes. This backbone has had caption
  supervision by construction, so Cap can add little to it; one switch measures how much of Cap's
  effect depends on what pretraining already knew.

Held-out accuracy is reported per group (``kind`` for identity). Same checkpoint layout as stage one
(``trunk.*`` weights), so ``model.init=<path>`` and feature extraction load it.
``python -m embedder.pretrain --config configs/demo/demo_caption.yaml [pretrain.targets=attributes]``
"""
from __future__ import annotations

import argparse
import json
import math
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from capcore import distributed
from capcore.atomic import write_text
from capcore.checkpoint import load_checkpoint, save_checkpoint
from capcore.device import autocast, pick_device, precision_choice
from capcore.errors import CapawareError, run_cli
from capcore.finite import check_finite, check_finite_weights
from capcore.fingerprint import run_fingerprint
from capcore.harness import LoopCheckpoint, StopRequested, asked_to_stop
from capcore.optim import adam
from capcore.run_layout import TrainDir
from embedder.config import load_config
from capdata.formats import read_records, train_splits
from embedder.data import ImageBank, normalise, split_records
from embedder.model import Embedder, build_model
from embedder.schedule import pretrain_lr


def image_tags(records) -> list[list[str]]:
    """Per image, its targets as ``group:value`` tags: every attribute when the json has them, else
    its categories (group ``category``)."""
    if records.attributes is not None:
        return [[f"{g}:{v}" for g, vals in a.items() for v in vals] for a in records.attributes]
    if records.categories is None:
        raise CapawareError("data.root", "the caption set has no per-image 'attributes' or 'categories'",
                            "class pretraining needs them: use the synthetic shapes-captions set, or "
                            "model.init=imagenet with real COCO")
    return [[f"category:{c}" for c in cats] for cats in records.categories]


def multi_hot(tags: list[list[str]], names: list[str]) -> np.ndarray:
    """[N, C] 0/1 rows over ``names``; a tag not among ``names`` (a held-out image's rare attribute) is left out."""
    lookup = {c: i for i, c in enumerate(names)}
    out = np.zeros((len(tags), len(names)), np.float32)
    for row, ts in enumerate(tags):
        out[row, [lookup[t] for t in ts if t in lookup]] = 1.0
    return out


def category_targets(records, names: list[str] | None = None) -> tuple[np.ndarray, list[str]]:
    """[N, C] multi-hot targets over ``names`` (default: the sorted tags of ``records``)."""
    tags = image_tags(records)
    names = names or sorted({t for ts in tags for t in ts})
    return multi_hot(tags, names), names


def object_kind(obj: dict, targets: str) -> str:
    """An object's identity class: ``kind:<colour> <shape>`` (identity) or ``kind:<shape>`` (identity_shape)."""
    return f"kind:{obj['colour']} {obj['shape']}" if targets == "identity" else f"kind:{obj['shape']}"


def kind_names(records, targets: str = "identity") -> list[str]:
    """The identity classes of every object in ``records``."""
    if getattr(records, "objects", None) is None:
        raise CapawareError("pretrain.targets", "identity targets need per-image 'objects' (their kind and box)",
                            "use the synthetic shapes-captions set, or pretrain.targets=attributes")
    return sorted({object_kind(o, targets) for objs in records.objects for o in objs})


def target_names(records, targets: str) -> list[str]:
    """The classifier's outputs for ``pretrain.targets``: kinds (identity) or attribute tags."""
    return category_targets(records)[1] if targets == "attributes" else kind_names(records, targets)


EXCLUSIVE_GROUPS = ("count", "background", "kind")
"""Groups with one value per image: scored by the arg-max; the others by the exact set of the group."""


def group_accuracy(logits: np.ndarray, targets: np.ndarray, names: list[str]) -> dict[str, float]:
    """Held-out accuracy per attribute group, and ``all`` (every group right): exact set for multi-label
    groups (every shape present named, none absent), arg-max for one-value groups (the count)."""
    groups: dict[str, list[int]] = {}
    for i, name in enumerate(names):
        groups.setdefault(name.split(":", 1)[0], []).append(i)
    right = {}
    for group, cols in groups.items():
        z, y = logits[:, cols], targets[:, cols] > 0.5
        right[group] = y[np.arange(len(y)), z.argmax(1)] if group in EXCLUSIVE_GROUPS else ((z > 0) == y).all(1)
    out = {group: float(r.mean()) for group, r in right.items()}
    out["all"] = float(np.all(list(right.values()), axis=0).mean())
    return out


def dihedral(images: torch.Tensor, rng: np.random.Generator) -> torch.Tensor:
    """Each image under one of the 8 flips / quarter turns. Shape, colour, size, count and background
    do not change under them, so each scene gives 8 views without a wrong target (on the 1,200 caption
    scenes alone, unaugmented, the trunk memorised them: train shape-set accuracy .78, val .08)."""
    which = rng.integers(8, size=len(images))
    out = images.clone()
    for k in np.unique(which):
        rows = torch.as_tensor(np.flatnonzero(which == k), device=images.device)
        x = torch.rot90(images[rows], int(k % 4), dims=(2, 3))
        out[rows] = torch.flip(x, dims=(3,)) if k >= 4 else x
    return out.contiguous(memory_format=torch.channels_last)


class Views:
    """What a pretraining (or held-out) batch shows: whole images with their targets, or, with ``crop``,
    object-centred crops of ``crop`` pixels of the input frame. An identity crop's one target is the kind
    of the object nearest its centre (the object the "photo" is of); an attributes crop's targets are the
    objects whose centre lies in it (their shape, colour, shape+colour, size and count) and the background.

    Crops exist because a ResNet's stride-32 trunk sees these objects (radius 5-10 px in a 64 px frame)
    at a scale it does not learn shapes from in a CPU budget: whole 64 px images left shape-set
    accuracy near 0 after 750 steps, single-object 64 px images left shape at chance after 250 (a 4-layer
    max-pooling CNN learned them in 100), while the same objects at twice the pixels were learned.
    Crops of a 128 px frame show them at that scale for the price of a 64 px image; the trunk is
    convolutional, so stage two then reads whole 128 px images at the scale it learned.
    """

    def __init__(self, bank: ImageBank, names: list[str], crop: int | None, targets: str):
        self.bank, self.names, self.crop, self.targets = bank, names, crop, targets
        self.lookup = {n: i for i, n in enumerate(names)}
        records = bank.records
        if crop is None and targets != "attributes":
            raise CapawareError("pretrain.crop", "identity targets are learned from object-centred crops",
                                "set pretrain.crop (e.g. 48), or pretrain.targets=attributes")
        if crop is None:
            self.image_targets, _ = category_targets(records, names)
            return
        needed = ("objects", "sizes") + (("attributes",) if targets == "attributes" else ())
        if any(getattr(records, key, None) is None for key in needed):
            raise CapawareError("pretrain.crop", "the pretraining set has no per-image 'objects' boxes, "
                                f"'width'/'height'{' and attributes' if targets == 'attributes' else ''}",
                                "use the synthetic caption set, or (attributes) pretrain.crop: null")
        if not 0 < crop <= bank.size:
            raise CapawareError("pretrain.crop", f"{crop} does not fit the {bank.size} px input frame",
                                f"use 0 < pretrain.crop <= data.input_size ({bank.size})")
        scale = bank.size / records.sizes[:, 0]
        self.centres = [np.array([[b["bbox"][0] + b["bbox"][2] / 2, b["bbox"][1] + b["bbox"][3] / 2]
                                  for b in objs]).reshape(-1, 2) * f for objs, f in zip(records.objects, scale)]

    def __len__(self) -> int:
        return len(self.bank)

    def batch(self, index: np.ndarray, rng: np.random.Generator, device="cpu") -> tuple[torch.Tensor, torch.Tensor]:
        """(normalised images [B, 3, S, S] (S = crop or the frame), targets [B, T])."""
        if self.crop is None:
            return self.bank.batch(index, device), torch.from_numpy(self.image_targets[index]).to(device)
        images, c, size = self.bank.uint8(index), self.crop, self.bank.size
        out = torch.empty((len(index), 3, c, c), dtype=images.dtype)
        y = np.zeros((len(index), len(self.names)), np.float32)
        for row, i in enumerate(index):
            centres = self.centres[i]
            cx, cy = centres[rng.integers(len(centres))] + rng.uniform(-c / 4, c / 4, 2)
            x0 = int(np.clip(round(cx - c / 2), 0, size - c))
            y0 = int(np.clip(round(cy - c / 2), 0, size - c))
            out[row] = images[row, :, y0:y0 + c, x0:x0 + c]
            if self.targets != "attributes":
                nearest = int(np.hypot(*(centres - [x0 + c / 2, y0 + c / 2]).T).argmin())
                kind = object_kind(self.bank.records.objects[i][nearest], self.targets)
                if kind not in self.lookup:
                    raise CapawareError(self.bank.records.image_paths[i], f"object kind {kind!r} is not among the "
                                        f"{len(self.names)} kinds the pretraining set shows",
                                        "pretrain on a set that shows every kind "
                                        "(a larger pretrain.data.synthetic.n_train)")
                y[row, self.lookup[kind]] = 1.0
                continue
            inside = [j for j, (x, y_) in enumerate(centres) if x0 <= x < x0 + c and y0 <= y_ < y0 + c]
            tags = [f"background:{v}" for v in self.bank.records.attributes[i]["background"]]
            tags.append(f"count:{len(inside)}")
            for j in inside:
                o = self.bank.records.objects[i][j]
                tags += [f"shape:{o['shape']}", f"colour:{o['colour']}", f"object:{o['colour']} {o['shape']}",
                         f"size:{o['size']}"]
            y[row, [self.lookup[t] for t in tags if t in self.lookup]] = 1.0
        return normalise(out, device), torch.from_numpy(y).to(device)


def pretrain_step(cfg, model, opt, views: Views, step: int, per_epoch: int, lr: float, device, dtype) -> torch.Tensor:
    """One optimiser step, ``step`` counted from 0: its batch (a function of the step: the seeded epoch
    order, crops and flips), the loss at ``lr``, the update; returns the loss."""
    p = cfg.pretrain
    epoch, s = divmod(step, per_epoch)
    order = np.random.default_rng([cfg.seed, epoch]).permutation(len(views))
    index = order[s * p.batch_size:(s + 1) * p.batch_size]
    rng = np.random.default_rng([cfg.seed, epoch, s, 1])
    images, y = views.batch(index, rng, device)
    if p.augment:
        images = dihedral(images, rng)
    for group in opt.param_groups:
        group["lr"] = lr
    with autocast(device, dtype):
        logits = model(images)
    loss = (torch.nn.functional.cross_entropy(logits.float(), y.argmax(1)) if p.targets != "attributes"
            else torch.nn.functional.binary_cross_entropy_with_logits(logits.float(), y))
    opt.zero_grad(set_to_none=True)
    loss.backward()
    opt.step()
    return loss


def pretrain(cfg, out_dir: Path, views: Views, progress: bool = True) -> Path:
    """Train trunk + a linear classifier on ``views`` (softmax cross-entropy on one kind per crop for
    identity targets, BCE on the multi-hot tags for attributes); return the checkpoint path. A finished
    checkpoint is reused only when it was trained with these settings; a killed run resumes from last.pt
    (``pretrain.stop_after_steps`` kills one on purpose, capcore.harness)."""
    out_dir = Path(out_dir)
    final, fingerprint = TrainDir(out_dir).model, run_fingerprint(cfg.pretrain, {"arch": cfg.model.arch}, cfg.run_dir)
    if final.is_file():
        if load_checkpoint(final).get("fingerprint") != fingerprint:
            raise CapawareError(final, "was trained with other pretrain settings (or an older capaware)",
                                "delete the class_pretrained folder to retrain it, or set another out_dir")
        return final
    p = cfg.pretrain
    device = pick_device(cfg.device)
    dtype, precision = precision_choice(p.precision, device, "pretrain.precision")
    if progress:
        print(f"class pretraining: {precision}", flush=True)
    torch.manual_seed(cfg.seed)
    model = Embedder(cfg.model.arch, len(views.names)).to(device).to(memory_format=torch.channels_last)
    opt = adam(model.parameters(), lr=p.lr, weight_decay=p.weight_decay)
    per_epoch = math.ceil(len(views) / p.batch_size)
    total = max(1, math.ceil(p.epochs * per_epoch))
    schedule = pretrain_lr(p, total)
    last = LoopCheckpoint(TrainDir(out_dir).last, fingerprint, {"model": model, "optimizer": opt},
                          other="other pretrain settings")
    state = last.load(device)  # a killed run goes on; a checkpoint of other settings is refused in one line
    start = int(state["step"]) if state else 0
    # scalars up to ``start`` were logged before its checkpoint: a resume hides only later ones
    writer = distributed.summary_writer(str(out_dir / "tb"), purge_step=start + 1)
    model.train()
    for step in tqdm(range(start + 1, total + 1), initial=start, total=total, desc="class pretraining",
                     disable=not progress, leave=False):  # ``step``: the steps taken once this one is
        loss = pretrain_step(cfg, model, opt, views, step - 1, per_epoch, p.lr * schedule(step - 1), device, dtype)
        if step % 10 == 0 or step % p.ckpt_every == 0 or step == total:
            check_finite(loss, out_dir, step, f"pretraining diverged at lr {p.lr} ({precision}); delete "
                         f"{out_dir} and lower pretrain.lr, or set pretrain.precision=float32")
            writer.add_scalar(f"pretrain/{'bce' if p.targets == 'attributes' else 'cross_entropy'}", loss.item(), step)
        if step % p.ckpt_every == 0 or step == total:
            check_finite_weights(model, out_dir, f"delete {out_dir} and set pretrain.precision=float32 (or lower "
                                 f"pretrain.lr, now {p.lr})")
        if step % p.ckpt_every == 0:
            last.save({"step": step}, device)
        if asked_to_stop(step, p.stop_after_steps, total):
            writer.close()  # the steps since the last checkpoint are lost, as in a kill, and replayed
            raise StopRequested(step)
    writer.close()
    save_checkpoint({"model": model.state_dict(), "arch": cfg.model.arch, "embed_dim": len(views.names),
                     "kind": "class-pretrained", "targets": p.targets, "step": total, "normalised": False,
                     "tags": views.names, "input_size": views.bank.size, "crop": views.crop,
                     "fingerprint": fingerprint}, final)
    last.path.unlink(missing_ok=True)
    return final


def accuracy(cfg, checkpoint: Path, views: Views, seed: int = 0) -> dict[str, float]:
    """Accuracy per attribute group on held-out ``views`` (``group_accuracy``): proof the backbone learned.
    Crops are drawn once from a generator seeded by ``seed``, so the figure is repeatable."""
    state = load_checkpoint(checkpoint)
    model = build_model(cfg.model.arch, len(views.names))
    model.load_state_dict(state["model"])
    model.eval()
    logits, targets, rng = [], [], np.random.default_rng([seed, 7])
    with torch.inference_mode():
        for start in range(0, len(views), 128):
            x, y = views.batch(np.arange(start, min(start + 128, len(views))), rng)
            logits.append(model(x).float())
            targets.append(y)
    return group_accuracy(torch.cat(logits).numpy(), torch.cat(targets).numpy(), views.names)


def report_accuracy(cfg, checkpoint: Path, records, names: list[str], split: str = "val") -> dict[str, float]:
    """Held-out accuracy per group on ``split`` of ``records`` (val: test images choose nothing), in the
    pretraining's own views (crops when it cropped), written next to the checkpoint as
    ``accuracy_<split>.json`` and printed; cached, since the checkpoint never changes."""
    path = Path(checkpoint).parent / f"accuracy_{split}.json"
    if path.is_file():
        return json.loads(path.read_text())
    held = split_records(records, split)
    bank = ImageBank.build(held, cfg.data.input_size, True, desc=f"{split} images")
    acc = accuracy(cfg, checkpoint, Views(bank, names, cfg.pretrain.crop, cfg.pretrain.targets), cfg.seed)
    write_text(path, json.dumps(acc, indent=1))
    return acc


def format_accuracy(acc: dict[str, float]) -> str:
    return ", ".join(f"{g} {v:.3f}" for g, v in acc.items())


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--split", default="val", help="held-out split to report accuracy on (default: val)")
    parser.add_argument("overrides", nargs="*")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    records = read_records(cfg.data)
    data = cfg.pretrain.data if cfg.pretrain.data is not None else cfg.data
    train = split_records(read_records(data) if cfg.pretrain.data is not None else records, train_splits(data))
    names = target_names(train, cfg.pretrain.targets)
    bank = ImageBank.build(train, cfg.data.input_size, cfg.data.in_memory, desc="train images")
    out = pretrain(cfg, Path(cfg.out_dir) / "class_pretrained",
                   Views(bank, names, cfg.pretrain.crop, cfg.pretrain.targets))
    acc = report_accuracy(cfg, out, records, names, args.split)
    print(f"class-pretrained backbone ({cfg.pretrain.targets}) -> {out} ({len(names)} classes; "
          f"{args.split} accuracy per group: "
          f"{format_accuracy(acc)})")


if __name__ == "__main__":
    run_cli(main)
