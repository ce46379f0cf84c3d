"""Label spaces for a study: one for the training images (graph, batches) and one for evaluation.

Pose and layout spaces are built per subset. The caption spaces share word vectors trained (or
loaded) once from the *training* captions and cached next to the run, so the label distances of the
evaluation split are measured with exactly the vectors the graph used; tf-idf takes its idf from the
training images only (Gordo & Larlus 2017).
"""
from __future__ import annotations

import sys
from pathlib import Path

import numpy as np

from capcore.atomic import atomic_path
from capcore.errors import CapawareError
from capdata.records import select
from embedder.config import SPACES
from embedder.labels.graph import NeighbourGraph, build_graph_bruteforce


class SubsetSpace:
    """A view of a label space restricted to ``index`` (item i of the view = item index[i])."""

    def __init__(self, space, index: np.ndarray):
        self.space, self.index, self.name = space, np.asarray(index), space.name

    def __len__(self) -> int:
        return len(self.index)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return self.space.pairwise(self.index[np.asarray(rows)], self.index[np.asarray(cols)])

    def params(self) -> dict:
        return self.space.params()

    @property
    def vectors(self):
        """The view's rows of the space's per-image vectors (the tf-idf bags; AttributeError for a space without)."""
        return self.space.vectors[self.index]


def word_vectors(cfg, train_records, cache: Path):
    """Pretrained vectors from ``captions.vectors``, else a Word2Vec trained once and cached."""
    from embedder.labels.wordvecs import load_vectors, tokenize, train_word2vec

    c = cfg.captions
    if c.vectors:
        return load_vectors(c.vectors)
    if cache.is_file():
        return load_vectors(cache, fmt="kv")
    kv = train_word2vec((tokenize(s) for caps in train_records.captions for s in caps),
                        dim=c.w2v_dim, seed=cfg.seed, epochs=c.w2v_epochs)

    with atomic_path(cache) as tmp:
        kv.save(str(tmp))
    return load_vectors(cache, fmt="kv")


def make_spaces(cfg, records, train_idx: np.ndarray, eval_idx: np.ndarray, out_dir: Path):
    """(train space, eval space) over ``records[train_idx]`` and ``records[eval_idx]``."""
    track = cfg.data.track
    if track == "pose":
        from embedder.labels.pose import PoseSpace
        return (PoseSpace(select(records, train_idx), cfg.data.input_size),
                PoseSpace(select(records, eval_idx), cfg.data.input_size))
    if track == "layout":
        from embedder.labels.layout import LayoutSpace
        return (LayoutSpace(select(records, train_idx), cfg.data.input_size),
                LayoutSpace(select(records, eval_idx), cfg.data.input_size))
    if cfg.captions.space not in SPACES:
        raise CapawareError("captions.space", f"unknown caption label space {cfg.captions.space!r}",
                            f"use one of {SPACES}")
    if cfg.captions.space == "tfidf":
        from embedder.labels.tfidf import TfidfSpace
        train_mask = np.zeros(len(records), bool)
        train_mask[train_idx] = True
        full = TfidfSpace(records.captions, train_mask)
        return SubsetSpace(full, train_idx), SubsetSpace(full, eval_idx)
    from embedder.labels.caption_space import CaptionSpace
    kv = word_vectors(cfg, select(records, train_idx), Path(out_dir) / "word_vectors.kv")
    source = cfg.captions.vectors or f"word2vec(dim={cfg.captions.w2v_dim}, seed={cfg.seed})"
    return tuple(CaptionSpace.from_records(select(records, idx), kv, stopwords=cfg.captions.stopwords,
                                           vector_source=source) for idx in (train_idx, eval_idx))


def caption_graph_workers(cfg, n_images: int, say: bool = True) -> int:
    """``graph.workers``, or where it is null this rank's share of the cores capped by memory (one line why)."""
    from capcore import machine
    from embedder.labels.graph_memory import graph_workers

    workers, why = graph_workers(cfg.graph.workers, n_images, machine.cores(), machine.available_memory(),
                                 machine.local_processes())
    if say and cfg.graph.workers is None:
        print(f"caption graph: {why}", file=sys.stderr)
    return workers


def build_graph(space, cfg, m: int, work_dir: Path, rows: tuple[int, int] | None = None,
                progress: bool = True) -> NeighbourGraph:
    """Exact top-m neighbours: pruned WMD search for caption sets, one matrix pass otherwise.

    ``rows=(lo, hi)``: only those items' rows, still searched over all items (one shard of the
    graph, see embedder.graph_shards); the rows equal the same rows of the whole graph.
    """
    if space.name == "caption_wmd":
        from embedder.labels.caption_graph import build_caption_graph
        return build_caption_graph(space, m=m, workers=caption_graph_workers(cfg, len(space), progress),
                                   chunk=cfg.graph.chunk,
                                   resume_dir=work_dir, rows=rows, progress=progress)
    return build_graph_bruteforce(space, m, rows=rows, progress=progress)
