"""Every row of a stage-one config: ``python -m embedder.rows --config configs/demo/demo_pose.yaml``.

The pipeline's stage one (one such run per track, which the configs and run folders call a stage-one study; the
research layer is studies/, a package of its own). Trains every method of the config, embeds the query and
database splits, and writes one retrieval file per row (Oracle, Untrained, each method) that
``embedder.retrieval_report`` turns into tables and plots. Each step skips what is already on disk, so a rerun
after a kill continues.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
import time
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from capcore import distributed
from capcore.atomic import atomic_path, write_text
from capcore.checkpoint import file_sha256, load_checkpoint
from capcore.config import to_yaml
from capcore.device import pick_device, precision_choice
from capcore.errors import run_cli
from capcore.run_layout import MANIFEST, RunDir, StudyDir, StudyManifest, write_manifest
from capcore.progress import progress_line
from capcore.stopwatch import Stopwatch
from embedder.config import load_config, slug
from capdata.formats import read_records, train_splits
from embedder.data import ImageBank, split_records
from embedder.model import build_model
from embedder.pretrain import (
    Views,
    format_accuracy,
    pretrain,
    report_accuracy,
    target_names,
)
from embedder.retrieval import ndcg_at_k, oracle_ranking, retrieve
from embedder.retrieval_grid import write_grids
from embedder.retrieval_report import write_report
from embedder.row_labels import row_labels
from embedder.graph_shards import build_across_ranks
from embedder.track import Track, load_or_build_graph, prepare_track
from embedder.train import train_method


def embed(model, bank: ImageBank, index: np.ndarray, device, batch_size: int = 128,
          normalise: bool = False, trunk_only: bool = False) -> np.ndarray:
    """Embeddings (or, ``trunk_only``, pooled trunk features: the pretrained-baseline row)."""
    model.eval()
    forward = model.trunk if trunk_only else model
    out = []
    with torch.inference_mode():
        for start in range(0, len(index), batch_size):
            emb = forward(bank.batch(index[start:start + batch_size], device)).float()
            out.append(torch.nn.functional.normalize(emb, dim=1) if normalise else emb)
    return torch.cat(out).cpu().numpy()


def frozen_features(model, bank: ImageBank, device, source: str):
    """A call giving the frozen initial trunk's pooled features of every image of ``bank``, and what computed
    them: the self-distillation labels (``method.labels: self``), computed only if a row asks for them."""
    return lambda: (embed(model, bank, np.arange(len(bank)), device, trunk_only=True), source)


def same_split(cfg) -> bool:
    return cfg.eval.query_split == cfg.eval.db_split


def write_retrieval(path: Path, name: str, order: int, retrieved: np.ndarray, track: Track,
                    ideal_dist: np.ndarray, source: str, query_emb: np.ndarray | None = None,
                    db_emb: np.ndarray | None = None) -> None:
    """One table row: retrieved database items per query, their label distances and the ideal ones;
    with the embeddings (float16) when given, so a report can map them (eval.reporting.report's t-SNE)."""
    q_items, db_items = track.query_idx, track.db_idx
    dist = np.stack([track.eval_space.pairwise(q_items[i:i + 1], db_items[retrieved[i]])[0]
                     for i in range(len(q_items))])
    emb = {} if query_emb is None else {"query_emb": query_emb.astype(np.float16), "db_emb": db_emb.astype(np.float16)}
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, name=name, order=order, source=source, retrieved=retrieved.astype(np.int32),
                     retrieved_dist=dist.astype(np.float32), ideal_dist=ideal_dist.astype(np.float32),
                     query_items=q_items, db_items=db_items, **emb)


def oracle(track: Track, k: int, exclude_self: bool, cfg=None) -> tuple[np.ndarray, np.ndarray]:
    """The ideal ranking: the database items nearest to each query in label space.

    Caption sets within one split use the pruned exact graph search (COCO: 500 x 5,000 set distances
    of 25 WMDs each would otherwise be solved one by one); other spaces compare all pairs.
    """
    if cfg is not None and exclude_self and track.eval_space.name == "caption_wmd" \
            and len(track.db_idx) == len(track.eval_space):
        graph = load_or_build_graph(StudyDir(cfg.out_dir).eval_labels, track.eval_space, cfg, k)
        return graph.nn_idx[track.query_idx].astype(np.int64), graph.nn_dist[track.query_idx]
    idx, dist = [], []
    for start in range(0, len(track.query_idx), 256):
        rows = track.query_idx[start:start + 256]
        d = track.eval_space.pairwise(rows, track.db_idx).astype(np.float64)
        if exclude_self:
            d[np.arange(len(rows)), self_columns(track, rows)] = np.inf
        i = oracle_ranking(d, k)
        idx.append(i)
        dist.append(np.take_along_axis(d, i, 1))
    return np.concatenate(idx), np.concatenate(dist)


def self_columns(track: Track, query_items: np.ndarray) -> np.ndarray:
    """Database position of each query's own item (queries drawn from the database split)."""
    return np.searchsorted(track.db_idx, query_items)


def write_items(path: Path, records) -> None:
    """What the qualitative grids show for each evaluation item: its image and one caption."""
    raw = getattr(records, "raw", None)
    captions = [r[0] if r else "" for r in raw] if raw else None
    write_text(path, json.dumps({"image_paths": [str(p) for p in records.image_paths], "captions": captions}))


def baseline_name(cfg) -> str:
    """The lower-bound row: the initial trunk's pooled features, before any metric learning."""
    if cfg.model.init == "none":
        return "Untrained"
    if cfg.model.init == "imagenet":
        return "ImageNet"
    return "Img (class-pretrained)" if "class_pretrained" in cfg.model.init else f"Init ({cfg.model.init})"


def pretraining_bank(cfg) -> ImageBank:
    """The training images of ``pretrain.data`` (train + restval), at the track's input size."""
    records = split_records(read_records(cfg.pretrain.data), train_splits(cfg.pretrain.data))
    return ImageBank.build(records, cfg.data.input_size, cfg.data.in_memory, desc="pretraining images")


def resolve_init(cfg, track: Track, progress: bool):
    """``model.init: class-pretrained`` -> train (once) the category classifier and point init at it."""
    if cfg.model.init != "class-pretrained":
        return cfg
    bank = pretraining_bank(cfg) if cfg.pretrain.data is not None else track.train_bank
    names = target_names(bank.records, cfg.pretrain.targets)
    views = Views(bank, names, cfg.pretrain.crop, cfg.pretrain.targets)
    path = pretrain(cfg, StudyDir(cfg.out_dir).class_pretrained.root, views, progress)
    if distributed.is_main() and getattr(bank.records, "attributes", None) is not None:
        # held out: the caption set's val images, the ones whose features the captioners will read
        acc = report_accuracy(cfg, path, read_records(cfg.data), names, "val")
        print(f"class-pretrained backbone ({cfg.pretrain.targets}): caption-set val accuracy per group: "
              f"{format_accuracy(acc)}")
    cfg = cfg.copy()
    cfg.model.init = str(path)
    return cfg


def oracle_row(cfg, where: StudyDir, track: Track, k: int, exclude: bool) -> tuple[np.ndarray, ImageBank]:
    """Write the items file and the Oracle row; return the ideal distances and the evaluation images."""
    write_items(where.items, track.eval_records)
    oracle_idx, ideal = oracle(track, k, exclude, cfg)
    write_retrieval(where.retrieval / "oracle.npz", "Oracle", 0, oracle_idx, track, ideal, "labels")
    return ideal, ImageBank.build(track.eval_records, cfg.data.input_size, cfg.data.in_memory, desc="eval images")


def run_study(cfg, progress: bool = True, watch: Stopwatch | None = None) -> Path:
    watch = watch or Stopwatch(cfg.name)  # the wall time of each piece: the study's timing line
    out = Path(cfg.out_dir)
    where = StudyDir(out)
    device = pick_device(cfg.device)
    distributed.init(device)
    rank0 = distributed.is_main()  # under torchrun the other processes only help train_method
    out.mkdir(parents=True, exist_ok=True)
    if rank0:
        write_text(where.config, to_yaml(cfg))
    with watch.phase("data and labels"):
        build_across_ranks(cfg, progress)  # under torchrun each rank builds a share of the graph's queries
        with distributed.rank_zero_first():  # rank 0 alone generates data (and builds the graph in one process)
            track = prepare_track(cfg)
    k, ret_dir = min(cfg.eval.k, len(track.db_idx) - 1), where.retrieval
    ret_dir.mkdir(exist_ok=True)
    exclude = same_split(cfg)
    if rank0:
        with watch.phase("evaluation"):
            ideal, eval_bank = oracle_row(cfg, where, track, k, exclude)

    rows = 1 + len(cfg.methods) * max(1, len(cfg.dims))

    def evaluate(name: str, order: int, model, normalise: bool, dest: Path, source: str,
                 trunk_only: bool = False, started: float | None = None) -> None:
        """Write one row, unless ``dest`` already holds it (``holds_row``), and say it on a progress line."""
        if not rank0:
            return
        if not holds_row(dest, name, order, source):
            with watch.phase("evaluation"):
                qe = embed(model, eval_bank, track.query_idx, device, normalise=normalise, trunk_only=trunk_only)
                de = embed(model, eval_bank, track.db_idx, device, normalise=normalise, trunk_only=trunk_only)
                self_cols = self_columns(track, track.query_idx) if exclude else None
                write_retrieval(dest, name, order, retrieve(qe, de, k, self_cols), track, ideal, source, qe, de)
        progress_line(row_line(cfg.name, order, rows, dest, k, started))

    with distributed.rank_zero_first(), watch.phase("class pretraining"):  # rank 0 alone (model.init)
        cfg = resolve_init(cfg, track, progress)
    torch.manual_seed(cfg.seed)
    baseline = build_model(cfg.model.arch, cfg.model.embed_dim, cfg.model.init, cfg.model.weights).to(device)
    baseline_source = f"{cfg.model.arch}:{cfg.model.init}:seed{cfg.seed}"
    evaluate(baseline_name(cfg), 1, baseline, False, ret_dir / "untrained.npz", baseline_source, trunk_only=True)
    init_features = frozen_features(baseline, track.train_bank, device, baseline_source)
    for d, dim in enumerate(list(cfg.dims) or [None]):
        for i, method in enumerate(cfg.methods):
            started = time.perf_counter()
            m = method.copy() if hasattr(method, "copy") else method
            if dim is not None:
                m.embed_dim = dim
            tag = slug(m.name) + (f"_d{dim}" if dim is not None else "")
            with watch.phase(f"row {m.name}" + (f" {dim}-D" if dim is not None else "")):
                ckpt = train_method(cfg, m, where.method(tag).root, track.train_bank,
                                    *row_labels(track, cfg, m.labels, init_features), progress)
            state = load_checkpoint(ckpt)
            model = build_model(cfg.model.arch, state["embed_dim"]).to(device)
            model.load_state_dict(state["model"])
            name = m.name + (f" {dim}-D" if dim is not None else "")
            evaluate(name, 2 + d * len(cfg.methods) + i, model, bool(state["normalised"]), ret_dir / f"{tag}.npz",
                     file_sha256(ckpt), started=started)
    return ret_dir


def holds_row(dest: Path, name: str, order: int, source: str) -> bool:
    """Whether ``dest`` already holds this row, with its embeddings, from the same ``source`` (a resumed study)."""
    if not dest.is_file():
        return False
    with np.load(dest) as f:
        return all(key in f for key in ("source", "query_emb", "db_emb")) \
            and (str(f["name"]), int(f["order"]), str(f["source"])) == (name, order, source)


def row_line(study: str, order: int, rows: int, path: Path, k: int, started: float | None = None) -> str:
    """``pose: row 2/5 L(Log-ratio)+M(Dense): nDCG@10 .812 (61 s)``, read back from the row's file (what the
    table will say); the time since ``started`` (a trained row's), when given."""
    with np.load(path) as f:
        at = min(10, k)  # the tables' first column
        ndcg = ndcg_at_k(f["retrieved_dist"], f["ideal_dist"])[at - 1]
        name = str(f["name"])
    took = "" if started is None else f" ({time.perf_counter() - started:.0f} s)"
    return f"{study}: row {order}/{rows} {name}: nDCG@{at} {ndcg:.3f}{took}"


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--results", default=None, help="folder for tables and plots [<run_dir>/results]")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    watch = Stopwatch(f"stage1 {cfg.name}")
    ret_dir = run_study(cfg, watch=watch)
    distributed.leave()  # rank 0 alone writes the tables below
    if not distributed.is_main():
        return
    results = Path(args.results) / cfg.name if args.results else RunDir(cfg.run_dir).results(cfg.name)
    command = shlex.join(["python", "-m", "embedder.rows", *(argv if argv is not None else sys.argv[1:])])
    with watch.phase("tables and grids"):
        print(write_report(ret_dir, results, title=f"{cfg.name} ({cfg.data.track} track)", command=command))
        grids = write_grids(ret_dir, results, queries=[0, 1, 2], top=8)
        write_manifest(results / MANIFEST, study_manifest(cfg), cfg.run_dir)
    print(f"tables, curves and {len(grids)} retrieval grids in {results}/")
    print(watch.line(), flush=True)


def study_manifest(cfg) -> StudyManifest:
    """The facts eval.reporting.report needs about this study, from its config (capcore/run_layout.py)."""
    dims = list(cfg.dims)
    rows = {m.name + (f" {d}-D" if d is not None else ""): m.loss for d in (dims or [None]) for m in cfg.methods}
    data = OmegaConf.to_container(cfg.data, resolve=True)
    precision = precision_choice(cfg.train.precision, pick_device(cfg.device))[1]
    return StudyManifest(name=cfg.name, track=cfg.data.track, study_dir=str(cfg.out_dir), sweep=bool(dims),
                         losses=rows, data=data, query_split=cfg.eval.query_split, db_split=cfg.eval.db_split,
                         precision=precision)


if __name__ == "__main__":
    run_cli(main)
