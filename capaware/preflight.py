"""Every check of what capaware needs on this machine, in one module: the tools (Java, the PTB tokenizer,
METEOR, SPICE's models, torch), the ImageNet weights, and what a pipeline's stages will read, write and hold.
Two fronts use it: ``capaware doctor`` (capaware/doctor.py) reports every check, and the pipeline's ``preflight``
(below; capaware.pipeline_plan) stops a run in its first seconds on what its pending stages would hit.

Preflight: what a pipeline's pending stages will need, checked in seconds before the first one starts.

Without these checks a missing Java runtime surfaced when the captioners scored their test split, ten
minutes or hours into a run, and a missing weight file or data folder when its stage began. Each
problem is one line: what is missing, which stage needs it, and the fix. Checks, by stage:

- ``captioners``, ``rl``: Java (each run scores its test captions with the PTB tokenizer and METEOR);
- ``data``, ``stage1``: every real (not generated) data folder and class-pretraining folder a stage-one
  config reads; ``stage1`` also the ImageNet weights where a config says ``model.init: imagenet``;
- ``features``: ImageNet weights for ImageNet backbones, the Karpathy json of real images, and the disk
  the feature files will take (images x (grid cells + 1) x channels x bytes per value);
- ``stage1`` of a caption track on real Karpathy data: the memory of the caption graph's worker
  processes (a set ``graph.workers`` that cannot fit is refused; a null one is capped at run time);
- ``joint``: XE's ``labels.h5`` and ``vocab.json`` and the features file it reads, unless a pending stage before
  it (captioners, features) writes them in the run folder.
- ``rl`` with a self-retrieval reward: the joint model and the unlabeled pool's features file, unless the pending
  joint or features stage writes them in the run folder.

Warnings, which do not stop the run (``preflight_warnings``): more graph or loader workers than cores,
and feature files on a network filesystem (every caption step reads HDF5 rows at random).

Inputs a stage before it writes (the embedded default's datasets, stage one's checkpoints) are not
checked: they do not exist yet, and their own stage checks them.
"""
from __future__ import annotations

import shutil
import time
from dataclasses import dataclass
from pathlib import Path

from capaware.stages import TABLE
from capcore.errors import CapawareError
from eval import captions_java as jv

JAVA_STAGES = tuple(s.name for s in TABLE if s.java)
"""Stages whose commands score captions with Java tools (capaware.stage: eval.score_captions): the stage table's
(capaware/stages.py) entries marked ``java``."""



def inside(path: str | Path, run_dir: str | Path) -> bool:
    """True for a path the run itself writes (under its run folder)."""
    run = Path(run_dir).resolve()
    return run == Path(path).resolve() or run in Path(path).resolve().parents


def missing_java(pending: list[str]) -> list[CapawareError]:
    needs = [s for s in pending if s in JAVA_STAGES]
    if not needs or check_java().status == "ok":
        return []
    return [CapawareError("java", f"no Java runtime on PATH; stages {', '.join(needs)} score captions with the PTB "
                          "tokenizer and METEOR, which are Java", jv.JAVA_FIX)]


def missing_weights(arch: str, weights: str, who: str) -> list[CapawareError]:
    err = weight_file_problem(arch, weights)
    return [] if err is None else [CapawareError(err.where, f"{err.problem} ({who})", err.fix or "")]


def weight_file_problem(arch: str, weights: str = "") -> CapawareError | None:
    """Why an architecture's ImageNet file cannot be loaded (not there, where to put it), or None."""
    from embedder.model import imagenet_weight_file

    try:
        imagenet_weight_file(arch, weights)
    except CapawareError as err:
        return err
    return None


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
        init = c.model.init
        if init not in ("none", "imagenet", "class-pretrained") and not inside(init, run_dir) \
                and not Path(init).is_file():  # a checkpoint path: the demo's stand-in, or a user's trunk
            out.append(CapawareError(init, f"checkpoint not found (model.init of {c.name})",
                                     "make stand-in writes the demo's (configs/demo/weights/README.md); or set "
                                     "model.init to a checkpoint that exists, or to class-pretrained to train one"))
    return out


def feature_bytes(cfg, n_images: int) -> int:
    """Upper bound of one feature file: att grid plus the pooled vector per image, at the storage dtype."""
    from embedder.backbones import width

    arch = cfg.backbone.arch or "resnet101"  # a checkpoint's trunk is read later; assume a 2048-channel one
    channels = width(arch)
    per_value = 2 if cfg.dtype == "float16" else 4
    return n_images * (cfg.att_size ** 2 + 1) * channels * per_value


def caption_images(path: str | Path, splits: list[str], fmt: str | None = None) -> int | None:
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
    json_path = cfg.images.captions
    return (bool(json_path) and not inside(json_path, run_dir)
            and caption_images(json_path, [], cfg.images.format) is None)


def existing_parent(path: Path) -> Path:
    while not path.exists():
        path = path.parent
    return path


def check_features(cfgs: list, run_dir: str) -> list[CapawareError]:
    """Real image lists and the disk the files of ``feature_extract.config`` configs need."""
    out, need = [], {}
    for c in cfgs:
        source = c.images.captions or c.images.folder
        if inside(source, run_dir):
            continue  # written by the data stage; not there yet on a first run
        if not Path(source).exists():
            out.append(CapawareError(source, f"image list not found (features {c.out})",
                               "put the Karpathy dataset_coco.json there (docs/real_data.md) or fix images.captions"))
            continue
        n = caption_images(c.images.captions, list(c.images.splits), c.images.format) if c.images.captions else None
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
    """Training images of a caption-track stage-one config on a real caption file (any caption format); None
    otherwise."""
    from capdata.formats import format_of, train_splits

    if cfg.data.track != "caption" or cfg.data.synthetic is not None:
        return None
    path = Path(cfg.data.root) / (cfg.data.annotation or format_of(cfg.data).annotation)
    return caption_images(path, list(train_splits(cfg.data)), cfg.data.format) if path.is_file() else None


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


def check_joint(cfgs: list, run_dir: str, pending: list[str]) -> list[CapawareError]:
    """The joint stage's inputs (joint configs): XE's labels.h5 / vocab.json, which the captioners stage writes on
    first use, and the features file, which the features stage writes; each must be there unless that stage is
    pending and writes it inside the run folder."""
    from joint.config import features_path  # torch-free

    wanted = []
    for c in cfgs:
        reader = f"the joint stage ({c.name})"
        wanted += [(Path(c.data.prepro_dir) / name, "captioners", reader, "train the captioners' XE first (it writes "
                    "labels.h5 and vocab.json), or point data.prepro_dir at a run that has them")
                   for name in ("labels.h5", "vocab.json")]
        wanted.append((features_path(c.data), "features", reader, "run the features stage, or set data.features"))
    return missing_inputs(wanted, run_dir, pending)


def missing_inputs(wanted: list[tuple[Path, str, str, str]], run_dir: str, pending: list[str]) -> list[CapawareError]:
    """One error per (path, the stage that writes it, who reads it, fix) whose file is absent, unless its writer is
    pending and writes it inside the run folder; each path named once."""
    out, seen = [], set()
    for path, writer, reader, fix in wanted:
        if path in seen or path.is_file() or (writer in pending and inside(path, run_dir)):
            continue
        seen.add(path)
        out.append(CapawareError(path, f"not found; {reader} reads it", fix))
    return out


def check_self_retrieval(cfgs: list, run_dir: str, pending: list[str]) -> list[CapawareError]:
    """The self-retrieval SCST runs' inputs (rl configs with ``retrieval.weight`` > 0): the joint model, which the
    joint stage writes, and the unlabeled pool's features file, which the features stage writes; each must be there
    unless that stage is pending and writes it inside the run folder."""
    wanted = []
    for c in cfgs:
        r, reader = c.get("retrieval"), f"the self-retrieval run {c.name}"
        if r is None or r.weight <= 0:
            continue
        wanted.append((Path(r.model), "joint", reader, "add the joint stage's config to the pipeline's joint: list "
                       "(it writes the model), or point retrieval.model at a joint best.pt"))
        if r.unlabeled:
            wanted.append((Path(r.unlabeled), "features", reader, "add the unlabeled images' features config to the "
                           "pipeline's features: list, or set retrieval.unlabeled=''"))
    return missing_inputs(wanted, run_dir, pending)


def preflight(pending: list[str], stage1: list, features: list, run_dir: str, joint: list = (),
              rl: list = ()) -> list[str]:
    """One line per problem the pending stages would hit; empty when they have what they need."""
    reads_data = stage1 if ("data" in pending or "stage1" in pending) else []
    trains = stage1 if "stage1" in pending else []  # the data stage reads the data, not the weights
    features = features if "features" in pending else []
    problems = missing_java(pending) + check_stage_one(reads_data, run_dir) + check_features(features, run_dir)
    problems += check_joint(list(joint) if "joint" in pending else [], run_dir, pending)
    problems += check_self_retrieval(list(rl) if "rl" in pending else [], run_dir, pending)
    if trains:
        from capcore import machine
        problems += check_graph_memory(trains, machine.available_memory(), machine.local_processes())
    for (arch, weights), who in imagenet_trunks(trains, features).items():
        problems += missing_weights(arch, weights, ", ".join(who))
    return [str(p) for p in problems]  # each CapawareError is where: problem (fix: ...)


# -- the doctor's checks (capaware doctor) ----------------------------------------------------------------------

@dataclass
class Check:
    name: str
    status: str  # ok | MISSING | warn
    detail: str
    fix: str = ""
    required: bool = True


def check_java() -> Check:
    info = jv.java_info()
    if info is None:
        return Check("java", "MISSING", "no java on PATH (PTB tokenizer, METEOR, SPICE)", jv.JAVA_FIX)
    note = "; SPICE cache gets --add-opens (Java >= 9)" if info.major >= 9 else ""
    return Check("java", "ok", f"{info.version} at {info.path}{note}")


def check_ptb() -> Check:
    try:
        t0 = time.time()
        out = jv.ptb_tokenize(["A man, riding a horse."])
        ok = out == ["a man riding a horse"]
        return Check("PTB tokenizer", "ok" if ok else "MISSING", f"offline, {time.time() - t0:.1f} s -> {out[0]!r}",
                     "" if ok else "reinstall pycocoevalcap (pip install --force-reinstall pycocoevalcap)")
    except Exception as err:  # report, never crash the doctor
        return Check("PTB tokenizer", "MISSING", str(err), "install Java; reinstall pycocoevalcap")


def check_meteor() -> Check:
    try:
        t0 = time.time()
        with jv.Meteor() as m:
            total, _ = m.score(["a dog runs on the grass"], [["a dog runs on the grass", "a dog on grass"]])
        ok = abs(total - 1.0) < 0.05
        return Check("METEOR 1.5", "ok" if ok else "warn", f"one process, {time.time() - t0:.1f} s incl. start; "
                     f"identical caption scores {total:.3f}")
    except Exception as err:
        return Check("METEOR 1.5", "MISSING", str(err),
                     "install Java; METEOR needs ~2 GB heap; reinstall pycocoevalcap if its jar/data is missing")


def check_spice(corenlp_dir: str | None) -> Check:
    why = jv.spice_unavailable(corenlp_dir)
    if why:
        return Check("SPICE models", "MISSING", "SPICE will be reported as unavailable (other metrics still run)",
                     why, required=False)
    return Check("SPICE models", "ok", f"CoreNLP 3.6.0 jars in {jv.corenlp_dir(corenlp_dir)}", required=False)


def check_torch() -> list[Check]:
    out = []
    try:
        import torch
        from capcore.cpu_isa import cpu_isa, cpu_line

        out.append(Check("torch", "ok", torch.__version__))
        isa = cpu_isa()
        auto = "bfloat16 autocast" if isa.bfloat16_native else "float32 (bfloat16 would be emulated: ~12x slower)"
        out.append(Check("CPU", "ok", f"{cpu_line()}; precision: auto -> {auto}", required=False))
        if torch.cuda.is_available():
            name = torch.cuda.get_device_name(0)
            out.append(Check("GPU", "ok", f"{torch.cuda.device_count()} x {name}", required=False))
        else:
            out.append(Check("GPU", "warn", "none (CPU only): fine for the embedded default, slow for COCO",
                             "a CUDA GPU and a CUDA build of torch for the paper configs", required=False))
    except ImportError:
        out.append(Check("torch", "MISSING", "not importable", "make venv (pip install torch)"))
    try:
        import torchvision
        out.append(Check("torchvision", "ok", torchvision.__version__, required=False))
    except ImportError:
        out.append(Check("torchvision", "MISSING", "not importable", "pip install torchvision", required=False))
    return out


def check_weights(arch: str, weights: str = "", used_by: str = "") -> Check:
    """One architecture's ImageNet file; required when a config given to the doctor loads it (``used_by``)."""
    need = f"needed by {used_by}" if used_by else "needed only for ImageNet init / features"
    try:
        from embedder.model import imagenet_weight_file

        try:  # the file the preflight's weight_file_problem looks for, found once; its path shown
            return Check(f"ImageNet {arch}", "ok", f"{imagenet_weight_file(arch, weights)} ({need})",
                         required=bool(used_by))
        except CapawareError as err:
            return Check(f"ImageNet {arch}", "MISSING", f"{err.where} not found; {need}", err.fix or str(err),
                         required=bool(used_by))
    except Exception as err:
        return Check(f"ImageNet {arch}", "warn", f"could not check ({err})", required=False)


def check_config(path: str) -> list[Check]:
    """What one pipeline config's stages need beyond the tools above: every ImageNet trunk they load,
    their real data folders and image lists, and the disk of their feature files."""
    from capcore.pipeline_config import Entry, load_pipeline
    from embedder.config import load_config
    from feature_extract.config import load_features_config

    cfg = load_pipeline(path, None)
    stage1 = [load_config(e.config, e.overrides) for e in (Entry.parse(t, cfg.run_dir) for t in cfg.stage1)]
    features = [load_features_config(e.config, e.overrides)
                for e in (Entry.parse(t, cfg.run_dir) for t in cfg.features)]
    checks = [check_weights(arch, weights, ", ".join(who))
              for (arch, weights), who in imagenet_trunks(stage1, features).items()]
    problems = check_stage_one(stage1, cfg.run_dir) + check_features(features, cfg.run_dir)
    checks += [Check("inputs", "MISSING", f"{p.where}: {p.problem}", p.fix) for p in problems]
    if not problems:
        checks.append(Check("inputs", "ok", f"the data folders, image lists and disk {path} needs"))
    checks += joint_checks(cfg)
    waiting = [c for c in features if uncounted(c, cfg.run_dir)]
    if waiting:  # the disk is checked against the image lists' counts; until they are in, say what it will take
        per = sum(feature_bytes(c, 100_000) for c in waiting)
        where = existing_parent(Path(waiting[0].out))
        lists = ", ".join(dict.fromkeys(str(c.images.captions) for c in waiting))
        checks.append(Check("disk", "warn", f"{len(waiting)} feature file(s) will take up to {per / 1e9:.0f} GB per "
                            f"100,000 images ({shutil.disk_usage(where).free / 1e9:.0f} GB free under {where}); "
                            f"checked exactly once {lists} is there", required=False))
    return checks


def joint_checks(cfg) -> list[Check]:
    """The joint stage's line: XE's labels.h5 and vocab.json it reads, there or still to be written by the
    captioners stage (a warning then, not a failure: a fresh run writes them before the joint stage starts)."""
    from capcore.pipeline_config import Entry
    from joint.config import load_joint_config

    dirs = dict.fromkeys(Path(load_joint_config(e.config, e.overrides).data.prepro_dir)
                         for e in (Entry.parse(t, cfg.run_dir) for t in cfg.joint))
    missing = [str(d / n) for d in dirs for n in ("labels.h5", "vocab.json") if not (d / n).is_file()]
    if not dirs:
        return []
    if not missing:
        return [Check("joint", "ok", f"XE's labels.h5 and vocab.json in {', '.join(map(str, dirs))}")]
    return [Check("joint", "warn", f"{', '.join(missing)} not there yet: the joint stage reads them",
                  "the captioners stage (XE) writes them; run it before the joint stage", required=False)]
