"""``capaware plan CONFIG [--run DIR]``: each stage's time, disk and peak memory on *this* machine, before a run.

A pipeline's cost is counted from its configs (images, epochs, batches, rows, feature sets) and priced with
timed probes run here (capaware.plan_probes: one step of each trunk, captioner and decoder at the configs'
sizes, a command's start, and scoring with pycocoevalcap's Java tools) and with two figures stored from benchmarks,
named where they are used: the caption graph's time per image (benchmarks/bench_caption_graph_scale.py) and its worker's
memory (embedder.labels.graph_memory). A stage's commands run ``jobs`` at a time, as scripts/pipeline.sh runs them, each
probed at its share of the cores. Work no probe prices (the report, word vectors, label distances, attention pictures)
is left out; a captioner with ``patience`` is priced at its ``epochs``, the most it may run. So the figures are
estimates, each printed with what it counts.
"""
from __future__ import annotations

import argparse
import functools
import json
import math
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path

import torch

from capcore import machine
from capcore.errors import CapawareError, run_cli
from capdata.captions import in_split, read_captions
from capcore.pipeline_config import Entry, feature_sets_of, jobs_of, load_pipeline
from embedder.backbones import width
from capaware import plan_probes as probe  # noqa: F401 (tests replace its probes)
from capaware.plan_prices import Prices

GRAPH_CORE_SECONDS_AT_20K, GRAPH_GROWTH = 0.099, 0.54
"""The caption graph's CPU seconds per image at N = 20,000 (49.5 ms wall on 2 processes) and its growth with N
(N^0.54 between 10,000 and 20,000): benchmarks/results/bench_caption_graph_scale.txt, a 2-core AMD EPYC (Zen 5)."""



@dataclass
class Work:
    """One command of a stage: its time here, what it writes, and its peak resident memory."""
    what: str
    seconds: float
    disk: int = 0
    ram: int = 0


@dataclass
class StagePlan:
    stage: str
    jobs: int
    works: list[Work] = field(default_factory=list)

    def seconds(self) -> float:
        """The stage's wall time with its commands run ``jobs`` at a time, in order (scripts/pipeline.sh)."""
        slots = [0.0] * max(1, min(self.jobs, len(self.works)))
        for w in self.works:
            slots[slots.index(min(slots))] += w.seconds
        return max(slots, default=0.0)

    def ram(self) -> int:
        biggest = sorted((w.ram for w in self.works), reverse=True)
        return sum(biggest[:max(1, self.jobs)])


@dataclass
class Counts:
    train: int
    val: int
    test: int


def synthetic_counts(s, track: str) -> Counts:
    val = (s.n_val if s.n_val is not None else s.n_train // 10) if track == "caption" else 0
    return Counts(s.n_train, val, s.n_test)


@functools.lru_cache(maxsize=None)
def caption_records(path: Path, fmt: str | None = None):
    """A caption file's records, read once per plan (COCO's is 100+ MB; every captioner run asks for it)."""
    return read_captions(path, fmt)


def caption_file_counts(path: Path, fmt: str | None = None) -> Counts:
    """Images of a caption file's train (with its format's other training splits), val and test splits."""
    records = caption_records(Path(path), fmt)
    return Counts(*(len(in_split(records, s)) for s in ("train", "val", "test")))


def stage_one_counts(c, given: Counts | None = None) -> Counts:
    """Images of a stage-one config's dataset: its generator's counts until the data stage writes it; ``given``
    (``--counts``) for real data not on this machine."""
    from capdata.formats import read_records, train_splits

    if c.data.synthetic is not None and not Path(c.data.root).exists():
        return synthetic_counts(c.data.synthetic, c.data.track)
    if given is not None and not Path(c.data.root).exists():
        return given
    try:
        splits = read_records(c.data).splits
    except CapawareError as err:  # real data elsewhere: plannable from its split sizes alone
        raise CapawareError(err.where, err.problem, f"{err.fix}; or plan without it: --counts TRAIN,VAL,TEST") \
            from None
    train = int(sum((splits == s).sum() for s in train_splits(c.data)))
    return Counts(train, int((splits == "val").sum()), int((splits == "test").sum()))


def caption_counts(json_path: str, stage1: list, given: Counts | None = None, fmt: str | None = None) -> Counts:
    """A caption file's splits; before the data stage, the counts of the stage-one config that generates it;
    ``given`` (``--counts``) for a json not on this machine."""
    path = Path(json_path)
    if path.is_file():
        return caption_file_counts(path, fmt)
    for c in stage1:
        if c.data.track == "caption" and c.data.synthetic is not None and path.parent == Path(c.data.root):
            return synthetic_counts(c.data.synthetic, "caption")
    if given is not None:
        return given
    raise CapawareError(json_path, "not found, and no stage-one config of this pipeline generates it",
                        "put the Karpathy json there, or give its split sizes: --counts TRAIN,VAL,TEST")


class Planner:
    def __init__(self, config: str, run: str | None, device: str, figures: str | None = None, gpus: int = 1,
                 counts: Counts | None = None):
        self.cfg = load_pipeline(config, run)
        self.run, self.device = self.cfg.run_dir, device
        self.prices, self.gpus, self.counts = Prices(device, figures), max(1, gpus), counts
        self.cores = (self.prices.figures or {}).get("host_cores") or machine.cores()  # the run's host
        from embedder.config import load_config
        from feature_extract.config import load_features_config

        r = self.run
        self.stage1 = [load_config(e.config, e.overrides) for e in (Entry.parse(x, r) for x in self.cfg.stage1)]
        self.features = [load_features_config(e.config, e.overrides)
                         for e in (Entry.parse(x, r) for x in self.cfg.features)]
        self.feature_sets = feature_sets_of(self.cfg, [c.out for c in self.features])

    def jobs(self, stage: str) -> int:
        return jobs_of(self.cfg, stage)

    def threads(self, stage: str, commands: int) -> int:
        return max(1, self.cores // max(1, min(self.jobs(stage), commands)))

    def stages(self) -> list[StagePlan]:
        """Each stage the table (capaware/stages.py) gives a Planner method (``Stage.estimate``), in order; a stage
        added to the table later (``Stage.added_later``) only when the pipeline config gives it configs."""
        from capaware.stages import TABLE

        return [getattr(self, s.estimate)(s.name) for s in TABLE
                if s.estimate and not (s.added_later and not getattr(self.cfg, s.key))]  # unused: no row

    # -- data ---------------------------------------------------------------------------------------------
    def data(self, stage: str = "data") -> StagePlan:
        from capdata.formats import format_of

        plan, seen = StagePlan(stage, self.jobs(stage)), set()
        sets = [(c.data, c.data.track) for c in self.stage1]
        sets += [(c.pretrain.data, "pretrain") for c in self.stage1
                 if c.pretrain.data is not None and c.model.init == "class-pretrained"]
        for data, track in sets:
            if data.synthetic is None or Path(data.root).exists() or data.root in seen:
                continue
            seen.add(data.root)
            s = data.synthetic
            n = s.n_train + s.n_test + (synthetic_counts(s, "caption").val if track == "caption" else 0)
            per_image = generator_seconds(format_of(data).synthetic, s.size, track == "caption")
            plan.works.append(Work(f"{Path(data.root).name}: {n:,} images", self.prices.process() + n * per_image,
                                   n * s.size * s.size))
        return plan

    # -- stage one ----------------------------------------------------------------------------------------
    def stage_one(self, stage: str = "stage1") -> StagePlan:
        from embedder.labels.graph_memory import graph_workers, worker_bytes

        plan = StagePlan(stage, self.jobs(stage))
        threads = self.threads(stage, len(self.stage1))
        pretrained = set()
        for c in self.stage1:
            n = stage_one_counts(c, self.counts)
            arch, size, prec = c.model.arch, c.data.input_size, c.train.precision
            seconds, parts = 0.0, []
            if c.model.init == "class-pretrained":
                key = (arch, c.pretrain.data.root if c.pretrain.data else c.data.root, c.pretrain.epochs, c.seed)
                if key not in pretrained:
                    pretrained.add(key)
                    pn = synthetic_counts(c.pretrain.data.synthetic, "pretrain").train \
                        if c.pretrain.data is not None and c.pretrain.data.synthetic is not None else n.train
                    steps = math.ceil(c.pretrain.epochs * math.ceil(pn / c.pretrain.batch_size))
                    cost = steps * self.prices.trunk(arch, c.pretrain.batch_size, c.pretrain.crop or size, True,
                                                     c.pretrain.precision, threads=threads) / self.gpus
                    seconds += cost
                    parts.append(f"class pretraining {steps:,} steps ({duration(cost)})")
            seconds += self.prices.process()
            step = self.prices.trunk(arch, c.train.batch_size, size, True, prec, c.train.freeze, threads) / self.gpus
            embed = self.prices.trunk(arch, 64, size, False, prec, threads=threads) / 64
            rows = 0.0
            for m in c.methods:
                aps = m.anchors_per_batch or c.train.anchors_per_batch
                steps = math.ceil((m.epochs or c.train.epochs) * math.ceil(n.train / aps))
                rows += steps * step + (n.train + n.test + n.val) * embed
            seconds += rows
            parts.append(f"{len(c.methods)} row(s) x {steps:,} steps of {c.train.batch_size} and their retrieval "
                         f"({duration(rows)})")
            ram = 3 * size * size * (n.train + n.test + n.val) if c.data.in_memory is not False else 0
            if c.data.track == "caption":
                workers, _ = graph_workers(c.graph.workers, n.train, self.threads(stage, len(self.stage1)),
                                           machine.available_memory())  # this machine's memory (note in table)
                graph = n.train * GRAPH_CORE_SECONDS_AT_20K * (n.train / 20_000) ** GRAPH_GROWTH / workers / self.gpus
                seconds += graph
                ram += workers * worker_bytes(n.train)
                parts.append(f"caption graph of {n.train:,} images on {workers} worker(s) ({duration(graph)})")
            params = sum(p.numel() for p in _trunk(arch).parameters())
            disk = len(c.methods) * 3 * 4 * params + (n.train * c.graph.m * 8 if c.data.track == "caption" else 0)
            plan.works.append(Work(f"{c.name}: " + ", ".join(parts), seconds, disk, ram + 8 * 4 * params))
        return plan

    # -- features -----------------------------------------------------------------------------------------
    def feature_dumps(self, stage: str = "features") -> StagePlan:
        from capaware.preflight import feature_bytes

        plan = StagePlan(stage, 1)
        for c in self.features:
            n = self.feature_images(c)
            arch = self.arch_of(c)
            per_image = self.prices.trunk(arch, c.batch_size, c.input.size, False, "auto",
                                          threads=self.cores) / c.batch_size
            plan.works.append(Work(f"{Path(c.out).name}: {n:,} images at {c.input.size} px, {arch}",
                                   self.prices.process() + n * per_image,
                                   feature_bytes(c, n), 4 * c.batch_size * 3 * c.input.size ** 2 * 4))
        return plan

    def feature_images(self, c) -> int:
        if c.images.captions:
            counts = caption_counts(c.images.captions, self.stage1, self.counts, c.images.format)
            return counts.train + counts.val + counts.test if not c.images.splits else sum(
                {"train": counts.train, "restval": 0, "val": counts.val, "test": counts.test}[s]
                for s in c.images.splits)
        return sum(1 for p in Path(c.images.folder).rglob("*") if p.is_file())

    def arch_of(self, c) -> str:
        """The feature trunk: the config's, else the stage-one config's whose run writes its checkpoint."""
        if c.backbone.arch:
            return c.backbone.arch
        for s in self.stage1:
            if Path(c.backbone.checkpoint).is_relative_to(Path(s.run_dir)):
                return s.model.arch
        return self.stage1[0].model.arch if self.stage1 else "resnet101"

    def feature_shape(self, name: str, features_dir: str) -> tuple[int, int]:
        """(regions, channels) of the feature set a captioner reads by name (img -> img.h5): from the features
        config that writes it, else from the file a run already holds, else the paper's 14 x 14 x 2048."""
        for c in self.features:
            if Path(c.out).stem == name:
                return c.att_size ** 2, width(self.arch_of(c))
        path = Path(name) if name.endswith(".h5") else Path(features_dir) / f"{name}.h5"
        if path.is_file():
            import h5py

            with h5py.File(path, "r") as f:
                return tuple(int(v) for v in f["att"].shape[1:])
        return 14 * 14, width("resnet101")  # the paper's grid

    # -- stage three --------------------------------------------------------------------------------------
    def captioners(self, stage: str) -> StagePlan:
        """XE (``captioners``) or SCST (``rl``): each of the stage's configs on every feature set; an SCST run's
        model is its XE run's."""
        from capaware.pipeline_plan import features_of, per_feature_set
        from capaware.stages import resolve, stage_of
        from captioners.config import load_captioner_config
        from captioners.core_registry import core_args

        def runs_of(entries, load):  # an entry naming its feature set runs on that set alone, as the pipeline's
            return [(load(e.config, e.overrides), features_of(e)) for x in entries
                    for e in per_feature_set(x, self.run, self.feature_sets)]

        xe = runs_of(self.cfg.captioners, load_captioner_config)
        entry = stage_of(stage)  # its configs (key), their loader, and the capaware.stage kind its steps are priced as
        runs = xe if stage == "captioners" else runs_of(getattr(self.cfg, entry.key), resolve(entry.loader))
        xe_model = {str(Path(c.out_dir).resolve()): c.model for c, _ in xe}
        plan = StagePlan(stage, self.jobs(stage))
        threads = self.threads(stage, len(runs))
        for c, features in runs:
            n = caption_counts(c.data.json, self.stage1, self.counts, c.data.format)
            model = c.model if stage == "captioners" else xe_model.get(str(Path(c.init).resolve().parent))
            if model is None:  # an SCST run from a checkpoint outside this pipeline: its model is read there
                from captioners.config import CapModelConfig
                model = CapModelConfig()
            regions, channels = self.feature_shape(features, c.data.features_dir)
            sizes = (regions, channels, model.rnn_size, model.input_encoding_size, model.att_hid_size,
                     tuple(sorted(core_args(model).items())))
            vocab = vocabulary(c.data, real=self.counts is not None)
            kind = entry.kind
            samples = getattr(c.train, "samples_per_image", 5)
            retrieval = getattr(c, "retrieval", None)
            images = c.train.batch_size  # an SCST step with unlabeled images samples captions for them too
            if retrieval is not None and retrieval.weight > 0 and retrieval.unlabeled:
                images = math.ceil(images * (1 + retrieval.unlabeled_ratio))
            step = self.prices.captioner(model.core, sizes, vocab, images, c.data.seq_per_img,
                                         c.data.max_length, kind, samples, threads) / self.gpus
            if retrieval is not None and retrieval.weight > 0:
                step += self.prices.retrieval(self.joint_sizes(retrieval.model, channels), vocab, images,
                                              images * samples, c.data.max_length, threads) / self.gpus
            steps = c.train.epochs * math.ceil(n.train / c.train.batch_size)
            vb = min(c.val.batch_size, max(1, n.val))
            greedy = self.prices.captioner(model.core, sizes, vocab, vb, 1, c.data.max_length, "greedy",
                                           threads=threads) / vb
            tb = min(100, max(1, n.test))
            beam = self.prices.captioner(model.core, sizes, vocab, tb, 1, c.data.max_length, "beam",
                                         threads=threads) / tb
            val_images = min(n.val, c.val.max_images or n.val) * (c.train.epochs // c.val.every_epochs)
            seconds = (self.prices.process() + steps * step + val_images * greedy + n.test * (beam + 2 * greedy)
                       + self.prices.scoring(n.test))
            params = 4 * (model.rnn_size * (model.rnn_size + channels + vocab) * 4)
            features_ram = n.train * (regions + 1) * channels * 2 if c.data.in_memory else 0
            plan.works.append(Work(f"{c.name} on {features}: {steps:,} steps of {c.train.batch_size}"
                                   + (" (at most: patience)" if c.train.patience else ""),
                                   seconds, 6 * params, features_ram + 4 * params))
        return plan


    def joint_sizes(self, model: str, channels: int) -> tuple:
        """(feature width, space width, word width, GRU layers) of a self-retrieval run's joint model: the
        pipeline's joint entry that writes it, else the file's own card, else the joint config's defaults."""
        from capaware.stages import resolve, stage_of
        from joint.config import JointModelConfig

        entry = stage_of("joint")
        for x in getattr(self.cfg, entry.key) or []:
            for f in self.feature_sets:
                e = Entry.parse(x, self.run, (f"data.features={f}",))
                c = resolve(entry.loader)(e.config, e.overrides)
                if (Path(c.out_dir) / "best.pt").resolve() == Path(model).resolve():
                    return channels, c.model.embed_dim, c.model.word_dim, c.model.num_layers
        if Path(model).is_file():
            from joint.loading import load_joint
            args = load_joint(model)[1].model_args
            return channels, args["embed_dim"], args["word_dim"], args["num_layers"]
        m = JointModelConfig()
        return channels, m.embed_dim, m.word_dim, m.num_layers

    def joint(self, stage: str) -> StagePlan:
        """The joint spaces (joint/): each config on every feature set, its captions counted and its vocabulary
        read through the pipeline's first XE config (the joint stage reads XE's labels.h5); a step timed by a
        probe (capaware.plan_probes.joint_seconds), each epoch's val and the test split embedded at a third of a
        step per batch (forward only)."""
        from capaware.stages import resolve, stage_of
        from captioners.config import load_captioner_config

        entry, plan = stage_of(stage), StagePlan(stage, self.jobs(stage))
        runs = [(resolve(entry.loader)(e.config, e.overrides), f) for x in getattr(self.cfg, entry.key)
                for f in self.feature_sets for e in [Entry.parse(x, self.run, (f"data.features={f}",))]]
        if not runs:
            return plan
        if not self.cfg.captioners:
            raise CapawareError("joint", "joint spaces to train but no captioners (XE) config to read the captions "
                                "and vocabulary of", "add the captioners entries the joint stage follows")
        first = Entry.parse(self.cfg.captioners[0], self.run)
        xe = load_captioner_config(first.config, first.overrides)
        n = caption_counts(xe.data.json, self.stage1, self.counts, xe.data.format)
        vocab = vocabulary(xe.data, real=self.counts is not None)
        threads = self.threads(stage, len(runs))
        for c, features in runs:
            _, channels = self.feature_shape(features, c.data.features_dir)
            m, t = c.model, c.train
            step = self.prices.joint((channels, m.embed_dim, m.word_dim, m.num_layers), vocab, t.batch_size,
                                     xe.data.max_length, threads) / self.gpus
            steps = t.epochs * math.ceil(n.train / t.batch_size)
            batches = t.epochs * math.ceil(n.val * 6 / t.batch_size) + math.ceil(n.test * 6 / t.batch_size)
            forward = batches * step / 3  # each split's images and their (about five) captions, forward only
            params = 4 * (vocab * m.word_dim + 3 * m.num_layers * (m.word_dim + m.embed_dim) * m.embed_dim
                          + channels * m.embed_dim)
            feats_ram = (n.train + n.val) * channels * 4
            plan.works.append(Work(f"{c.name} on {features}: {steps:,} steps of {t.batch_size}",
                                   self.prices.process() + steps * step + forward, 4 * params, feats_ram + 4 * params))
        return plan


def _trunk(arch: str):
    from embedder.model import build_model

    return build_model(arch, 128)


COCO_VOCABULARY = 9_487
"""Karpathy COCO's training words seen more than 5 times (self-critical.pytorch's prepro): a real json's
vocabulary when the json is not on this machine."""


def vocabulary(data, real: bool = False) -> int:
    """Words of the vocabulary: prepro's file when it exists, else the training captions' words over the threshold."""
    vocab = Path(data.prepro_dir) / "vocab.json"
    if vocab.is_file():
        return len(json.loads(vocab.read_text()))
    path = Path(data.json)
    if not path.is_file():  # real data elsewhere: COCO's; the embedded default's shapes and colours: tens of words
        return COCO_VOCABULARY if real else 100
    records = caption_records(path, data.format)
    counts = Counter(w for i in in_split(records, "train") for s in records.captions[i] for w in s)
    return sum(1 for c in counts.values() if c > data.word_count_threshold) + 1


def generator_seconds(generator, size: int, caption: bool) -> float:
    """Seconds per image of an embedded-default generator: the slope between two small runs."""
    import importlib

    module, _, name = generator.partition(":")
    generate, times = getattr(importlib.import_module(module), name), []
    with tempfile.TemporaryDirectory() as tmp:
        for k, n in enumerate((8, 24)):
            extra = {"n_val": n // 4} if caption else {}
            t0 = time.perf_counter()
            generate(out=Path(tmp) / str(k), n_train=n, n_test=n // 4, seed=0, size=size, **extra)
            times.append((time.perf_counter() - t0, n + n // 4 + (n // 4 if caption else 0)))
    (t1, n1), (t2, n2) = times
    return max(t2 - t1, 0.0) / (n2 - n1)


def table(plans: list[StagePlan], planner: "Planner") -> str:
    from capcore.cpu_isa import cpu_line

    here = torch.cuda.get_device_name() if planner.device == "cuda" else f"{cpu_line()}, {machine.cores()} cores"
    where = planner.prices.machine or here
    gpus = (f" x {planner.gpus} (stage one, XE and SCST split over them: --nproc {planner.gpus})"
            if planner.gpus > 1 else "")
    lines = [f"capaware plan for {where}{gpus}; planned on {here}. Estimates: see capaware/plan.py for what they "
             "count", *(f"note: {n}" for n in planner.prices.notes),
             *(["note: the caption graph's workers are capped by this machine's memory, not the host's"]
               if planner.prices.figures else []),
             "", "| stage | commands | time | disk | peak RAM |", "|---|---:|---:|---:|---:|"]
    for p in plans:
        lines.append(f"| {p.stage} | {len(p.works)} | {duration(p.seconds())} | {gb(sum(w.disk for w in p.works))} "
                     f"| {gb(p.ram())} |")
    total = sum(p.seconds() for p in plans)
    lines.append(f"| all | {sum(len(p.works) for p in plans)} | {duration(total)} | "
                 f"{gb(sum(w.disk for p in plans for w in p.works))} | {gb(max(p.ram() for p in plans))} |")
    lines.append("")
    for p in plans:
        for w in p.works:
            lines.append(f"- {p.stage}: {w.what}: {duration(w.seconds)}")
    return "\n".join(lines)


def duration(seconds: float) -> str:
    if seconds < 90:
        return f"{seconds:.0f} s"
    if seconds < 5400:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def gb(n: int) -> str:
    return f"{n / 1e9:.1f} GB" if n >= 1e8 else f"{n / 1e6:.0f} MB"


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(prog="capaware plan", description=__doc__.splitlines()[0])
    ap.add_argument("config", help="a pipeline config (configs/*/pipeline_*.yaml)")
    ap.add_argument("--run", default=None, help="run folder (overrides the config's run_dir)")
    ap.add_argument("--json", default=None, help="also write the plan here")
    ap.add_argument("--figures", default=None, help="price steps with a benchmark's stored figures for another "
                    "machine (benchmarks/results/plan_figures_*.json) instead of this one's probes")
    ap.add_argument("--gpus", type=int, default=1, help="processes the run's training stages split over (--nproc)")
    ap.add_argument("--counts", default=None, help="TRAIN,VAL,TEST images of real data not on this machine "
                    "(COCO's Karpathy splits: 113287,5000,5000)")
    a = ap.parse_args(argv)
    device = "cuda" if torch.cuda.is_available() else "cpu"
    counts = Counts(*map(int, a.counts.split(","))) if a.counts else None
    planner = Planner(a.config, a.run, device, a.figures, a.gpus, counts)
    plans = planner.stages()
    print(table(plans, planner))
    if a.json:
        Path(a.json).write_text(json.dumps({p.stage: {"seconds": p.seconds(), "disk": sum(w.disk for w in p.works),
                                                      "ram": p.ram(), "commands": [w.__dict__ for w in p.works]}
                                            for p in plans}, indent=1) + "\n")
    return 0


if __name__ == "__main__":
    run_cli(lambda: sys.exit(main()))
