"""A retrieval study: ``python -m embedder.study --config configs/demo_pose.yaml``.

Trains every method of the config, embeds the query and database splits, and writes one retrieval
file per row (Oracle, Untrained, each method) that ``eval.retrieval_report`` turns into tables and
plots. Each step skips what is already on disk, so a rerun after a kill continues.
"""
from __future__ import annotations

import argparse
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import torch
from tqdm import tqdm

from embedder.atomic import atomic_path
from embedder.checkpoint import load_checkpoint
from embedder.config import load_config
from embedder.data import ImageBank, label_space, read_records, split_records
from embedder.errors import CapawareError, run_cli
from embedder.labels.graph import NeighbourGraph, build_graph_bruteforce, read_graph, top_m_sorted, write_graph
from embedder.model import build_model
from embedder.records import select
from embedder.train import pick_device, slug, train_method


@dataclass
class Track:
    train_bank: ImageBank
    train_space: object
    graph: NeighbourGraph
    query_idx: np.ndarray  # rows of ``eval_records`` that are queries
    db_idx: np.ndarray  # rows of ``eval_records`` that form the database
    eval_records: object
    eval_space: object


def load_or_build_graph(path: Path, space, m: int) -> NeighbourGraph:
    """Reuse ``labels.h5`` when it was built from the same label space and item count."""
    expected = {"label_space": space.name, "m": m, "params": json.dumps(space.params(), sort_keys=True),
                "n_items": len(space)}
    if path.is_file():
        graph = read_graph(path)
        if all(graph.attrs.get(k) == v for k, v in expected.items()):
            return graph
    graph = build_graph_bruteforce(space, m)
    write_graph(path, graph.nn_idx, graph.nn_dist, expected)
    return read_graph(path)


def prepare_track(cfg) -> Track:
    records = read_records(cfg.data)
    train = split_records(records, ("train", "restval") if cfg.data.track == "caption" else "train")
    if len(train) == 0:
        raise CapawareError(cfg.data.root, "no training images in the dataset", "check the split fields")
    space = label_space(train, cfg.data)
    graph = load_or_build_graph(Path(cfg.out_dir) / "labels.h5", space, cfg.graph.m)
    bank = ImageBank.build(train, cfg.data.input_size, cfg.data.in_memory, desc="train images")

    e = cfg.eval
    eval_mask = np.isin(records.splits, [e.query_split, e.db_split])
    eval_records = select(records, eval_mask)
    q = np.flatnonzero(eval_records.splits == e.query_split)
    if e.n_queries is not None and e.n_queries < len(q):
        q = np.sort(np.random.default_rng(cfg.seed).choice(q, e.n_queries, replace=False))
    db = np.flatnonzero(eval_records.splits == e.db_split)
    return Track(bank, space, graph, q, db, eval_records, label_space(eval_records, cfg.data))


def embed(model, bank: ImageBank, index: np.ndarray, device, batch_size: int = 128,
          normalise: bool = False) -> np.ndarray:
    model.eval()
    out = []
    with torch.inference_mode():
        for start in range(0, len(index), batch_size):
            emb = model(bank.batch(index[start:start + batch_size], device)).float()
            out.append(torch.nn.functional.normalize(emb, dim=1) if normalise else emb)
    return torch.cat(out).cpu().numpy()


def same_split(cfg) -> bool:
    return cfg.eval.query_split == cfg.eval.db_split


def write_retrieval(path: Path, name: str, order: int, retrieved: np.ndarray, track: Track,
                    ideal_dist: np.ndarray) -> None:
    """One table row: retrieved database items per query, their label distances and the ideal ones."""
    q_items, db_items = track.query_idx, track.db_idx
    dist = np.stack([track.eval_space.pairwise(q_items[i:i + 1], db_items[retrieved[i]])[0]
                     for i in range(len(q_items))])
    with atomic_path(path) as tmp:
        with open(tmp, "wb") as handle:
            np.savez(handle, name=name, order=order, retrieved=retrieved.astype(np.int32),
                     retrieved_dist=dist.astype(np.float32), ideal_dist=ideal_dist.astype(np.float32),
                     query_items=q_items, db_items=db_items)


def oracle(track: Track, k: int, exclude_self: bool) -> tuple[np.ndarray, np.ndarray]:
    """The ideal ranking: the database items nearest to each query in label space."""
    idx, dist = [], []
    for start in range(0, len(track.query_idx), 256):
        rows = track.query_idx[start:start + 256]
        d = track.eval_space.pairwise(rows, track.db_idx)
        self_cols = (np.searchsorted(track.db_idx, rows) if exclude_self else None)
        i = retrieve_from_dist(d, k, self_cols)
        idx.append(i)
        dist.append(np.take_along_axis(d, i, 1))
    return np.concatenate(idx), np.concatenate(dist)


def retrieve_from_dist(d: np.ndarray, k: int, self_cols: np.ndarray | None) -> np.ndarray:
    if self_cols is None:
        d = np.concatenate([d, np.full((len(d), 1), np.inf)], 1)
        self_cols = np.full(len(d), d.shape[1] - 1)
    return top_m_sorted(d, self_cols, k)[0].astype(np.int64)


def run_study(cfg, progress: bool = True) -> Path:
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.yaml").write_text(__import__("omegaconf").OmegaConf.to_yaml(cfg))
    track = prepare_track(cfg)
    k = min(cfg.eval.k, len(track.db_idx) - 1)
    ret_dir = out / "retrieval"
    ret_dir.mkdir(exist_ok=True)
    exclude = same_split(cfg)
    oracle_idx, ideal = oracle(track, k, exclude)
    write_retrieval(ret_dir / "oracle.npz", "Oracle", 0, oracle_idx, track, ideal)
    eval_bank = ImageBank.build(track.eval_records, cfg.data.input_size, cfg.data.in_memory, desc="eval images")
    device = pick_device(cfg.device)

    def evaluate(name: str, order: int, model, normalise: bool, dest: Path) -> None:
        if dest.is_file():
            return
        qe = embed(model, eval_bank, track.query_idx, device, normalise=normalise)
        de = embed(model, eval_bank, track.db_idx, device, normalise=normalise)
        self_cols = np.searchsorted(track.db_idx, track.query_idx) if exclude else None
        d = (qe ** 2).sum(1)[:, None] - 2 * qe @ de.T + (de ** 2).sum(1)[None, :]
        write_retrieval(dest, name, order, retrieve_from_dist(d, k, self_cols), track, ideal)

    dims = list(cfg.dims) or [None]
    untrained_dim = cfg.model.embed_dim
    torch.manual_seed(cfg.seed)
    evaluate("Untrained" if cfg.model.init == "none" else f"Init ({cfg.model.init})", 1,
             build_model(cfg.model.arch, untrained_dim, cfg.model.init, cfg.model.weights).to(device),
             False, ret_dir / "untrained.npz")
    for d, dim in enumerate(dims):
        for i, method in enumerate(cfg.methods):
            m = method.copy() if hasattr(method, "copy") else method
            if dim is not None:
                m.embed_dim = dim
            tag = slug(m.name) + (f"_d{dim}" if dim is not None else "")
            ckpt = train_method(cfg, m, out / "methods" / tag, track.train_bank, track.train_space,
                                track.graph.nn_idx, progress)
            state = load_checkpoint(ckpt)
            model = build_model(cfg.model.arch, state["embed_dim"]).to(device)
            model.load_state_dict(state["model"])
            name = m.name + (f" {dim}-D" if dim is not None else "")
            evaluate(name, 2 + d * len(cfg.methods) + i, model, bool(state["normalised"]), ret_dir / f"{tag}.npz")
    return ret_dir


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--results", default="results", help="folder for tables and plots")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    ret_dir = run_study(cfg)
    from eval.retrieval_report import write_report

    print(write_report(ret_dir, Path(args.results) / cfg.name, title=f"{cfg.name} ({cfg.data.track} track)"))


if __name__ == "__main__":
    run_cli(main)
