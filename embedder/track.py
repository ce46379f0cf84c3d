"""A study's data, ready to train and evaluate: records read, label spaces and neighbour graph built.

Stage one's training CLI (``embedder.train``), its study (``embedder.rows``) and the sharded graph
build (``embedder.graph_shards``) all start here, so each prepares a track the same way.
"""
from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

import numpy as np

from capcore.errors import CapawareError
from capcore.run_layout import StudyDir
from capdata.records import select
from capdata.formats import read_records, train_splits
from embedder.data import ImageBank
from embedder.labels.graph import NeighbourGraph, read_graph, write_graph
from embedder.spaces import build_graph, make_spaces


@dataclass
class Track:
    train_bank: ImageBank
    train_space: object
    graph: NeighbourGraph
    query_idx: np.ndarray  # rows of ``eval_records`` that are queries
    db_idx: np.ndarray  # rows of ``eval_records`` that form the database
    eval_records: object
    eval_space: object
    row_labels: dict = field(default_factory=dict)  # method.labels -> (space, nn_idx), built once (embedder.row_labels)


def load_or_build_graph(path: Path, space, cfg, m: int) -> NeighbourGraph:
    """Reuse ``path`` when it was built from the same label space and item count; else build it."""
    expected = {"label_space": space.name, "m": m, "params": json.dumps(space.params(), sort_keys=True),
                "n_items": len(space)}
    if path.is_file():
        graph = read_graph(path)
        if all(graph.attrs.get(k) == v for k, v in expected.items()):
            return graph
    graph = build_graph(space, cfg, m, path.with_suffix(".chunks"))
    write_graph(path, graph.nn_idx, graph.nn_dist, {**graph.attrs, **expected})
    return read_graph(path)


def split_indices(cfg, records) -> tuple[np.ndarray, np.ndarray]:
    """Rows of ``records`` that train, and rows that evaluate (queries and database)."""
    train_idx = np.flatnonzero(np.isin(records.splits, train_splits(cfg.data)))
    if len(train_idx) == 0:
        raise CapawareError(cfg.data.root, "no training images in the dataset", "check the split fields")
    eval_idx = np.flatnonzero(np.isin(records.splits, [cfg.eval.query_split, cfg.eval.db_split]))
    return train_idx, eval_idx


def prepare_track(cfg) -> Track:
    records = read_records(cfg.data)
    out = Path(cfg.out_dir)
    out.mkdir(parents=True, exist_ok=True)
    train_idx, eval_idx = split_indices(cfg, records)
    e = cfg.eval
    train_space, eval_space = make_spaces(cfg, records, train_idx, eval_idx, out)
    graph = load_or_build_graph(StudyDir(out).labels, train_space, cfg, cfg.graph.m)
    train = select(records, train_idx)
    bank = ImageBank.build(train, cfg.data.input_size, cfg.data.in_memory, desc="train images")

    eval_records = select(records, eval_idx)
    q = np.flatnonzero(eval_records.splits == e.query_split)
    if e.n_queries is not None and e.n_queries < len(q):
        q = np.sort(np.random.default_rng(cfg.seed).choice(q, e.n_queries, replace=False))
    db = np.flatnonzero(eval_records.splits == e.db_split)
    return Track(bank, train_space, graph, q, db, eval_records, eval_space)
