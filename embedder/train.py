"""Stage-one training of one loss + mining method: ``python -m embedder.train --config FILE [k=v ...]``.

One screen of loop (nanoGPT style): seeded sampler -> images -> embeddings -> label distances of the
batch -> mined triplets -> loss -> SGD. Checkpoints are atomic and carry the sampler position and RNG
states, so a killed run resumes to the same weights as an uninterrupted one. With ``train.freeze`` the
trunk's first stages keep their weights and their maps are computed once, so a step runs only the rest.

Under ``torchrun`` (capcore/distributed.py) every process draws the same global batch; process r
embeds its share of the batch's images and computes the label distances of its share of the anchors;
embeddings (differentiably) and label distances are all-gathered, and every process evaluates the
loss of the whole global batch. Each process's share of the gradient then arrives world-size times
through the gather's backward and DDP divides by the world size: the step is the one-process step of
the same global batch. BatchNorm follows: ``train.batchnorm=batch`` (the default) is SyncBatchNorm on CUDA and
frozen running statistics where SyncBatchNorm cannot run (CPU, gloo), said in one line; ``per_process``
normalises each share alone (prepare_batchnorm).
"""
from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from capcore import distributed
from capcore.config import config_arguments
from capcore.checkpoint import load_checkpoint
from capcore.device import autocast, pick_device, precision_choice
from capcore.errors import CapawareError, run_cli
from capcore.fingerprint import run_fingerprint
from capcore.harness import LoopCheckpoint
from capcore.optim import adam
from capcore.run_layout import StudyDir, TrainDir
from embedder.config import RowSettings, load_config, row_settings, slug, text_on
from embedder.data import normalise
from embedder.head_warmup import pooled_features, warm_up_head
from embedder.jitter import jitter
from embedder.g17_steps import take_pool_steps
from embedder.losses.method_loss import MethodLoss
from embedder.step_loop import RowOutputs, after_step, training_net
from embedder.model import build_model
from embedder.param_groups import param_groups
from embedder.sampler import AnchorBatchSampler
from embedder.schedule import stage_one_lr
from embedder.row_labels import row_labels
from embedder.track import prepare_track
from embedder.trunk_cache import computed_once


def positive_mask(graph_idx: np.ndarray, items: np.ndarray, anchors: np.ndarray, positives: int) -> torch.Tensor:
    """[A, B]: batch member is among the anchor's ``positives`` label-nearest training items."""
    near = graph_idx[items[anchors], :positives]  # [A, P]
    return torch.from_numpy((items[None, :, None] == near[:, None, :]).any(-1))


def method_fingerprint(cfg, method) -> str:
    """What determines a row's weights (capcore.fingerprint): the config's values that are not bookkeeping,
    and the row (loss, mining, margin, overrides)."""
    from omegaconf import DictConfig, OmegaConf

    row = OmegaConf.to_container(method, resolve=True) if isinstance(method, DictConfig) else method
    return run_fingerprint(cfg, {"method": row})


class StepBatches(torch.utils.data.Dataset):
    """Item n = everything step ``start + n`` needs: images, anchors, label distances, positives, and the global
    batch's training indices (the text losses read their caption bags).

    Batches are a pure function of the step (sampler), so DataLoader workers can decode images and
    compute label distances (WMD for captions: the expensive part) ahead of the training loop. With
    ``world`` > 1 an item holds process ``rank``'s share (``distributed.share``) of the images and of
    the label-distance rows; anchors and positives (cheap) stay those of the whole global batch.
    """

    def __init__(self, sampler: AnchorBatchSampler, bank, space, nn_idx: np.ndarray, positives: int,
                 start: int, total: int, rank: int = 0, world: int = 1, inputs=None):
        self.sampler, self.space, self.nn_idx = sampler, space, nn_idx
        self.inputs = inputs or bank.uint8  # item indices -> network input (images, or frozen-prefix maps)
        self.positives, self.start, self.total = positives, start, total
        self.rank, self.world = rank, world

    def __len__(self) -> int:
        return self.total - self.start

    def items_of(self, n: int):
        """Step ``start + n`` without its images (the head warm-up uses cached trunk features)."""
        epoch, s = divmod(self.start + n, self.sampler.steps_per_epoch())
        b = self.sampler.batch(epoch, s)
        label_dist = self.space.pairwise(b.items[b.anchors], b.items)
        return (b.items, torch.from_numpy(b.anchors), torch.from_numpy(label_dist),
                positive_mask(self.nn_idx, b.items, b.anchors, self.positives))

    def __getitem__(self, n: int):
        epoch, s = divmod(self.start + n, self.sampler.steps_per_epoch())
        b = self.sampler.batch(epoch, s)
        rows = distributed.share(len(b.items), self.rank, self.world)
        mine = b.anchors[distributed.share(len(b.anchors), self.rank, self.world)]
        if len(mine):
            label_dist = self.space.pairwise(b.items[mine], b.items)
        else:  # more processes than anchors (the paper's one anchor per batch): this one has none
            label_dist = np.zeros((0, len(b.items)), dtype=np.float32)
        return (self.inputs(b.items[rows]), torch.from_numpy(b.anchors), torch.from_numpy(label_dist),
                positive_mask(self.nn_idx, b.items, b.anchors, self.positives), torch.from_numpy(b.items))


def memory_format() -> torch.memory_format:
    """channels_last for every step: it pays under bfloat16 autocast, on GPUs, and in float32 on the CPUs
    without native bfloat16 that ``precision: auto`` sends to float32. ``python benchmarks/bench_stage1_precision.py``
    (resnet18, batch 96, one thread) on the 2-core AMD EPYC (Zen 5) held to AVX2: float32 channels_last
    1.08 s vs 1.20 s default at 64 px, 0.534 vs 0.537 s at 32 px; unheld (AVX-512 BF16) 0.86 vs 0.94 s
    and 0.244 vs 0.249 s. Only an earlier Xeon with AMX ran float32 faster in the default layout."""
    return torch.channels_last


MAX_FROZEN_CACHE_GB = 8.0


def frozen_maps(prefix: torch.nn.Module, bank, device, dtype) -> torch.Tensor:
    """The frozen prefix's output for every image of ``bank``, once per study process (eval mode: running
    BatchNorm statistics, as at test time). A step then starts from these maps instead of the pixels;
    the study's next row, frozen from the same weights, reuses them (embedder.trunk_cache)."""
    return computed_once("frozen_maps", prefix, bank, (str(device), dtype),
                         lambda: compute_frozen_maps(prefix, bank, device, dtype))


@torch.no_grad()
def compute_frozen_maps(prefix: torch.nn.Module, bank, device, dtype, batch: int = 128) -> torch.Tensor:
    prefix.eval()
    out = []
    for s in range(0, len(bank), batch):
        with autocast(device, dtype):
            out.append(prefix(normalise(bank.uint8(np.arange(s, min(s + batch, len(bank)))), device)).float())
        gb = out[0][0].numel() * 4 * len(bank) / 1e9  # known after the first batch
        if gb > MAX_FROZEN_CACHE_GB:
            raise CapawareError("train.freeze", f"the frozen maps of {len(bank)} images would take {gb:.0f} GB",
                                "use train.freeze=none on a set this large (the cache is for small sets)")
    return torch.cat(out).contiguous(memory_format=memory_format())


def prepare_batchnorm(model: torch.nn.Module, mode: str, device: torch.device,
                      world: int) -> tuple[torch.nn.Module, str]:
    """``train.batchnorm`` (checked by the config) -> (the model, the mode in effect). In one process every mode
    but frozen is plain BatchNorm. Under torchrun: batch (the default) shares the global batch's statistics,
    through SyncBatchNorm on CUDA and, where SyncBatchNorm cannot run (CPU, gloo), with frozen running statistics
    instead, said in one line (each process's 6-7 images are never a silent default); sync insists on
    SyncBatchNorm; per_process normalises each process's share alone; frozen uses running statistics."""
    if world == 1 or mode in ("frozen", "per_process"):
        return model, mode
    if mode == "batch" and device.type != "cuda":
        if distributed.is_main():
            print(f"train.batchnorm: SyncBatchNorm needs CUDA; on {device.type} with {world} processes BatchNorm "
                  "uses frozen running statistics (train.batchnorm=per_process: each process's own share)", flush=True)
        return model, "frozen"
    if device.type != "cuda":
        raise CapawareError("train.batchnorm", "sync needs CUDA (torch's SyncBatchNorm has no CPU kernel)",
                            "use train.batchnorm=batch (frozen statistics on CPU) or per_process")
    return torch.nn.SyncBatchNorm.convert_sync_batchnorm(model), "sync"


def make_optimizer(t, params: list, lr: float) -> torch.optim.Optimizer:
    """``train.optimizer`` (checked by the config): sgd with momentum, or adam."""
    if t.optimizer == "sgd":
        return torch.optim.SGD(params, lr=lr, momentum=t.momentum, weight_decay=t.weight_decay)
    return adam(params, lr=lr, weight_decay=t.weight_decay)


@dataclass
class StageOneRun:
    """Everything one row's training holds, built in a fixed order (the seeded initialisation first)."""
    model: torch.nn.Module
    criterion: MethodLoss
    prefix: torch.nn.Module  # the frozen first stages (empty with train.freeze=none)
    rest: torch.nn.Module
    params: list
    opt: torch.optim.Optimizer
    sched: torch.optim.lr_scheduler.LambdaLR
    sampler: AnchorBatchSampler
    total: int
    device: torch.device
    dtype: torch.dtype | None
    world: int
    rank: int
    batchnorm: str  # the mode in effect (prepare_batchnorm)

    @classmethod
    def build(cls, cfg, method, row: RowSettings, nn_idx: np.ndarray, progress: bool, bags=None) -> "StageOneRun":
        t = cfg.train
        device = pick_device(cfg.device)
        dtype, precision = precision_choice(t.precision, device)
        world, rank = distributed.init(device), distributed.rank()
        if world > t.batch_size:
            raise CapawareError("train.batch_size", f"{t.batch_size} images cannot be shared by {world} processes",
                                f"set train.batch_size >= {world} or start fewer processes")
        if rank == 0 and progress:
            print(f"{method.name}: {precision}", flush=True)
        torch.manual_seed(cfg.seed)
        model = build_model(cfg.model.arch, row.embed_dim, cfg.model.init, cfg.model.weights).to(device)
        model, batchnorm = prepare_batchnorm(model.to(memory_format=memory_format()), t.batchnorm, device, world)
        criterion = MethodLoss(method, t, cfg.seed, bags, row.embed_dim).to(device)  # bags: the text losses
        prefix, rest = model.split_trunk(t.freeze)
        prefix.requires_grad_(False)
        groups = param_groups(model, criterion, row.lr, t.layer_lr)
        params = [p for g in groups for p in g["params"]]
        opt = make_optimizer(t, groups, row.lr)  # every group carries its own lr
        sampler = AnchorBatchSampler(nn_idx, t.batch_size, t.k, row.anchors_per_batch, cfg.seed)
        per_epoch = sampler.steps_per_epoch()
        total = max(1, math.ceil(row.epochs * per_epoch))
        sched = torch.optim.lr_scheduler.LambdaLR(opt, stage_one_lr(t, per_epoch, total))
        return cls(model, criterion, prefix, rest, params, opt, sched, sampler, total, device, dtype, world, rank,
                   batchnorm)

    def checkpoint(self, fingerprint: str, path: Path) -> LoopCheckpoint:
        return LoopCheckpoint(path, fingerprint, {"model": self.model, "criterion": self.criterion,
                                                  "optimizer": self.opt, "scheduler": self.sched},
                              {"loss_rng": self.criterion.generator}, other="another config or method")

    def network_inputs(self, bank):
        """(what the loader serves per item index, how a served batch becomes the network's input)."""
        if len(self.prefix):  # the frozen prefix runs once per image, here, instead of once per step
            maps = frozen_maps(self.prefix, bank, self.device, self.dtype)
            # the loader yields item indices and the maps are gathered here: on CUDA ``maps`` lives on the
            # GPU, which a forked DataLoader worker (data.num_workers > 0) must never touch
            return torch.as_tensor, (lambda index: maps[index.to(maps.device)])
        layout = memory_format()
        return bank.uint8, (lambda x: normalise(x, self.device).contiguous(memory_format=layout))


def step_loader(steps: StepBatches, workers: int) -> torch.utils.data.DataLoader:
    """Items are whole steps (batch_size None): workers decode images and compute label distances ahead."""
    return torch.utils.data.DataLoader(steps, batch_size=None, shuffle=False, num_workers=workers,
                                       persistent_workers=False, prefetch_factor=2 if workers else None)


def train_method(cfg, method, out_dir: Path, bank, space, nn_idx: np.ndarray, progress: bool = True,
                 on_step=None) -> Path:
    """Train ``method`` on the images in ``bank`` (labels ``space``, graph ``nn_idx``); return model.pt.

    ``on_step(step, model)``, when given, is called after every optimiser step (the benchmarks' learning
    curves); it must leave the model's mode and weights as it found them."""
    where, fingerprint = TrainDir(Path(out_dir)), method_fingerprint(cfg, method)
    if where.model.is_file():
        if load_checkpoint(where.model).get("fingerprint") != fingerprint:
            raise CapawareError(where.model, "a finished run of another config or method is in the way",
                                f"delete {out_dir} to retrain, or choose another out_dir")
        return where.model
    if cfg.train.sampler == "g17_pool" and method.loss != "g17_hinge":
        raise CapawareError(f"{method.name}: train.sampler", f"g17_pool mines triplets for the g17_hinge loss, not "
                            f"{method.loss}", "train this row with train.sampler: anchors")
    row = row_settings(cfg, method)
    bags = getattr(space, "vectors", None) if text_on(method.text) else None  # the text losses' caption bags
    run = StageOneRun.build(cfg, method, row, nn_idx, progress, bags)
    last = run.checkpoint(fingerprint, where.last)
    inputs, to_input = run.network_inputs(bank)
    fresh = not last.path.is_file()  # a resumed run has its warmed head already
    warmup = warm_head(run, cfg.train, bank, space, nn_idx, inputs, to_input) if fresh else []
    state = last.load(run.device)
    step = int(state["step"]) if state else 0
    fields = {"arch": cfg.model.arch, "embed_dim": row.embed_dim, "normalised": run.criterion.normalised,
              "method": method.name}
    if bags is not None:  # the text tower's stems, in its rows' order: a later query names words (embedder.query)
        fields["text_vocab"] = list(getattr(getattr(space, "space", space), "vocab"))

    def checkpoint(path: Path, at: int, done: bool) -> None:
        if run.rank == 0:
            last.save({**fields, "step": at, "done": done}, run.device, path)

    # scalars up to ``step`` were logged before its checkpoint: a resume hides only later ones
    writer = distributed.summary_writer(str(where.root / "tb"), purge_step=step + 1)
    for n, value in enumerate(warmup, 1):
        writer.add_scalar("train/head_warmup_loss", value, n)
    steps = StepBatches(run.sampler, bank, space, nn_idx, cfg.train.positives, step, run.total, run.rank, run.world,
                        inputs)
    out = RowOutputs(writer, lambda at, done: checkpoint(last.path, at, done), Path(out_dir), method.name,
                     f"delete {out_dir} and lower {method.name}'s lr (now {row.lr})", progress and run.rank == 0)
    if cfg.train.sampler == "g17_pool":  # Gordo & Larlus's triplets mined from a pool, the same step count
        take_pool_steps(run, cfg, inputs, to_input, nn_idx, out, step, on_step)
    else:
        take_steps(run, cfg, steps, to_input, out, on_step)
    checkpoint(where.model, run.total, done=True)
    if run.rank == 0:
        last.path.unlink(missing_ok=True)
    distributed.barrier()  # the others return once model.pt exists
    return where.model


def warm_head(run: StageOneRun, t, bank, space, nn_idx: np.ndarray, inputs, to_input) -> list[float]:
    """``train.head_warmup_steps`` of LP-FT on the frozen trunk's pooled features (embedder/head_warmup.py)."""
    if t.head_warmup_steps <= 0:
        return []
    warm = StepBatches(run.sampler, bank, space, nn_idx, t.positives, 0, t.head_warmup_steps)
    feats = computed_once("pooled_features", run.model.trunk, bank, (str(run.device),),
                          lambda: pooled_features(run.rest, lambda index: to_input(inputs(index)), len(bank)))
    return warm_up_head(run.model, run.criterion, warm, feats, t.head_warmup_steps, t.head_warmup_lr, run.device)


def take_steps(run: StageOneRun, cfg, steps: StepBatches, to_input, out: RowOutputs, on_step=None) -> None:
    """The loop, from ``steps.start`` to ``run.total``: a step, its logs and checkpoints, a requested stop."""
    t, step = cfg.train, steps.start
    net = training_net(run)
    bar = tqdm(total=run.total, initial=step, desc=out.name, disable=not out.progress, leave=False)
    for images, anchors, label_dist, positive, items in step_loader(steps, cfg.data.num_workers):
        x = jitter(to_input(images), t.jitter, cfg.seed, step)  # step: the one being taken, counted from 0
        loss = one_step(run, net, x, anchors, label_dist, positive, items)
        step += 1
        after_step(run, t, out, loss, step, bar, on_step)
    bar.close()
    out.writer.close()


def one_step(run: StageOneRun, net: torch.nn.Module, x: torch.Tensor, anchors, label_dist, positive,
             items=None) -> torch.Tensor:
    """Embed, (gather the global batch), mine and take the loss, and one optimiser and schedule step."""
    emb = net(x)
    label_dist = label_dist.to(run.device)
    if run.world > 1:  # the whole global batch on every process (see the module docstring)
        emb = distributed.gather_rows(emb, positive.shape[1], grad=True)
        label_dist = distributed.gather_rows(label_dist, len(anchors))
    loss = run.criterion(emb, anchors.to(run.device), label_dist, positive.to(run.device), items)
    run.opt.zero_grad(set_to_none=True)
    loss.backward()
    distributed.average_grads(run.criterion.parameters())  # outside DDP; equal on every rank anyway
    run.opt.step()
    run.sched.step()
    return loss


def main(argv: list[str] | None = None) -> None:
    cfg = load_config(*config_arguments(__doc__, argv))
    distributed.init(pick_device(cfg.device))
    with distributed.rank_zero_first():  # rank 0 alone generates data and builds the graph
        track = prepare_track(cfg)
    out = train_method(cfg, cfg.method, StudyDir(cfg.out_dir).method(slug(cfg.method.name)).root,
                       track.train_bank, *row_labels(track, cfg, cfg.method.labels))
    if distributed.is_main():
        print(f"stage one: {cfg.method.name} -> {out}")
    distributed.leave()


if __name__ == "__main__":
    run_cli(main)
