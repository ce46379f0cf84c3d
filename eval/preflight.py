"""What a pipeline's pending stages will need, checked in seconds before the first one starts.

Without these checks a missing Java runtime surfaced when the captioners scored their test split, ten
minutes or hours into a run, and a missing weight file or data folder when its stage began. Each
problem is one line: what is missing, which stage needs it, and the fix. Checks, by stage:

- ``captioners``, ``rl``: Java (each run scores its test captions with the PTB tokenizer and METEOR);
- ``data``, ``stage1``: every real (not generated) data folder and class-pretraining folder a stage-one
  config reads; ``stage1`` also the ImageNet weights where a config says ``model.init: imagenet``;
- ``features``: ImageNet weights for ImageNet backbones, the Karpathy json of real images, and the disk
  the feature files will take (images x (grid cells + 1) x channels x bytes per value);
- ``stage1`` of a caption track on real Karpathy data: the memory of the caption graph's worker
  processes (a set ``graph.workers`` that cannot fit is refused; a null one is capped at run time).

Warnings, which do not stop the run (``preflight_warnings``): more graph or loader workers than cores,
and feature files on a network filesystem (every caption step reads HDF5 rows at random).

Inputs a stage before it writes (the embedded default's datasets, stage one's checkpoints) are not
checked: they do not exist yet, and their own stage checks them.
"""
from __future__ import annotations

import shutil
from pathlib import Path

from capcore.errors import CapawareError
from eval import captions_java as jv

JAVA_STAGES = ("captioners", "rl")
"""Stages whose commands score captions with Java tools (capaware.stage: eval.score_captions)."""

WIDE = ("resnet50", "resnet101", "resnet152")
"""Trunks with a 2048-channel layer4; the others (resnet10, 18, 34) have 512."""


def inside(path: str | Path, run_dir: str | Path) -> bool:
    """True for a path the run itself writes (under its run folder)."""
    run = Path(run_dir).resolve()
    return run == Path(path).resolve() or run in Path(path).resolve().parents


def missing_java(pending: list[str]) -> list[CapawareError]:
    needs = [s for s in pending if s in JAVA_STAGES]
    if not needs or jv.java_info() is not None:
        return []
    return [CapawareError("java", f"no Java runtime on PATH; stages {', '.join(needs)} score captions with the PTB "
                    "tokenizer and METEOR, which are Java", jv.JAVA_FIX)]


def missing_weights(arch: str, weights: str, who: str) -> list[CapawareError]:
    from embedder.model import imagenet_weight_file

    try:
        imagenet_weight_file(arch, weights)
    except CapawareError as err:
        return [CapawareError(err.where, f"{err.problem} ({who})", err.fix or "")]
    return []


def imagenet_trunks(stage1: list, features: list) -> dict[tuple[str, str], list[str]]:
    """(arch, weights key) of every ImageNet trunk the configs load -> who loads it."""
    out: dict[tuple[str, str], list[str]] = {}
    for c in stage1:
        if c.model.init == "imagenet":
            out.setdefault((c.model.arch, c.model.weights), []).append(f"stage one {c.name}")
    for c in features:
        if c.backbone.checkpoint == "imagenet":
            out.setdefault((c.backbone.arch or "", c.backbone.weights), []).append(f"features {Path(c.out).name}")
    return out


def check_stage_one(cfgs: list, run_dir: str) -> list[CapawareError]:
    """Real data folders of the stage-one configs (``embedder.config.Stage1Config``)."""
    out = []
    for c in cfgs:
        sets = [(c.data, f"data.root of {c.name}")]
        if c.pretrain.data is not None and c.model.init == "class-pretrained":
            sets.append((c.pretrain.data, f"pretrain.data.root of {c.name}"))
        for data, key in sets:
            if data.synthetic is None and not inside(data.root, run_dir) and not Path(data.root).is_dir():
                out.append(CapawareError(data.root, f"data folder not found ({key}, format {data.format})",
                                   "put the release there (docs/real_data.md lists every file) or set " + key))
    return out


def feature_bytes(cfg, n_images: int) -> int:
    """Upper bound of one feature file: att grid plus the pooled vector per image, at the storage dtype."""
    arch = cfg.backbone.arch or "resnet101"  # a checkpoint's trunk is read later; assume the widest
    channels = 2048 if arch in WIDE else 512
    per_value = 2 if cfg.dtype == "float16" else 4
    return n_images * (cfg.att_size ** 2 + 1) * channels * per_value


def caption_images(path: str | Path, splits: list[str], fmt: str = "karpathy") -> int | None:
    """Images of ``splits`` (all when empty) in a caption file; None when it cannot be read (the features stage
    names a bad file in its own line)."""
    from capdata.captions import read_captions

    try:
        records = read_captions(path, fmt)
    except CapawareError:
        return None
    return int(sum(1 for s in records.splits if not splits or s in splits))


def uncounted(cfg, run_dir: str) -> bool:
    """Whether a features config reads a Karpathy json that is not here yet (so its disk cannot be counted);
    one the data stage writes inside the run is counted when it is written."""
    json_path = cfg.images.karpathy
    return bool(json_path) and not inside(json_path, run_dir) and caption_images(json_path, [], cfg.images.format) is None


def existing_parent(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def check_features(cfgs: list, run_dir: str) -> list[CapawareError]:
    """Real image lists and the disk the files of ``feature_extract.config`` configs need."""
    out, need = [], {}
    for c in cfgs:
        source = c.images.karpathy or c.images.folder
        if inside(source, run_dir):
            continue  # written by the data stage; not there yet on a first run
        if not Path(source).exists():
            out.append(CapawareError(source, f"image list not found (features {c.out})",
                               "put the Karpathy dataset_coco.json there (docs/real_data.md) or fix images.karpathy"))
            continue
        n = caption_images(c.images.karpathy, list(c.images.splits), c.images.format) if c.images.karpathy else None
        if n:
            done = Path(c.out).stat().st_size if Path(c.out).is_file() else 0  # a resumed dump grows from there
            need[c.out] = (max(feature_bytes(c, n) - done, 0), n)
    if need:
        total = sum(b for b, _ in need.values())
        where = existing_parent(Path(next(iter(need))).parent)
        free = shutil.disk_usage(where).free
        if total > free:
            images = max(n for _, n in need.values())
            out.append(CapawareError(where, f"{len(need)} feature file(s) of up to {images:,} images need up to "
                               f"{total / 1e9:.0f} GB, {free / 1e9:.0f} GB free",
                               "free space there or set run_dir to a larger disk"))
    return out


def caption_graph_images(cfg) -> int | None:
    """Training images of a caption-track stage-one config on a real Karpathy json; None otherwise."""
    from capdata.formats import train_splits

    if cfg.data.track != "caption" or cfg.data.format != "karpathy" or cfg.data.synthetic is not None:
        return None
    path = Path(cfg.data.root) / (cfg.data.annotation or "dataset_coco.json")
    return caption_images(path, list(train_splits(cfg.data))) if path.is_file() else None


def check_graph_memory(cfgs: list, memory: int | None, processes: int = 1) -> list[CapawareError]:
    """A set ``graph.workers`` whose processes need more memory than this machine has available."""
    from embedder.labels.graph_memory import worker_bytes, workers_that_fit

    out = []
    for c in cfgs:
        n = caption_graph_images(c)
        if n is None or memory is None:
            continue
        need = (c.graph.workers or 1) * processes * worker_bytes(n)
        if need > memory:
            fits = workers_that_fit(n, memory, processes)
            set_to = f"set graph.workers={fits} or leave it null (the cores' count, capped by memory)" \
                if c.graph.workers else "free memory, or build the graph in shards (docs/devices.md)"
            out.append(CapawareError(f"graph.workers of {c.name}", f"{c.graph.workers or 1} caption-graph "
                                     f"worker(s) x {processes} rank(s) need about {need / 1e9:.1f} GB for {n:,} "
                                     f"images ({worker_bytes(n) / 1e9:.2f} GB each), {memory / 1e9:.1f} GB available",
                                     set_to))
    return out


def preflight_warnings(pending: list[str], stage1: list, features: list, captioners: list = ()) -> list[str]:
    """Settings that slow the run without stopping it: one line each, with its fix."""
    from capcore import machine

    cores, out = machine.cores(), []
    for c in stage1 if "stage1" in pending else []:
        if c.graph.workers and c.graph.workers > cores and c.data.track == "caption":
            out.append(f"graph.workers of {c.name}: {c.graph.workers} processes on {cores} cores (fix: set "
                       f"graph.workers={cores} or leave it null)")
    for c in captioners:
        if c.data.num_workers > cores:
            out.append(f"data.num_workers of {c.name}: {c.data.num_workers} loader processes on {cores} cores "
                       f"(fix: set data.num_workers={cores})")
    for c in features if "features" in pending else []:
        kind = machine.on_network_filesystem(Path(c.out).parent)
        if kind:
            out.append(f"{c.out}: on a network filesystem ({kind}); the captioners read its rows at random, each "
                       "read a round trip (fix: set run_dir to a local disk, or copy the file there)")
    return out


def preflight(pending: list[str], stage1: list, features: list, run_dir: str) -> list[str]:
    """One line per problem the pending stages would hit; empty when they have what they need."""
    reads_data = stage1 if ("data" in pending or "stage1" in pending) else []
    trains = stage1 if "stage1" in pending else []  # the data stage reads the data, not the weights
    features = features if "features" in pending else []
    problems = missing_java(pending) + check_stage_one(reads_data, run_dir) + check_features(features, run_dir)
    if trains:
        from capcore import machine
        problems += check_graph_memory(trains, machine.available_memory(), machine.local_processes())
    for (arch, weights), who in imagenet_trunks(trains, features).items():
        problems += missing_weights(arch, weights, ", ".join(who))
    return [str(p) for p in problems]  # each CapawareError is where: problem (fix: ...)
