"""The training labels of one stage-one row (``method.labels``, issues #46 and #56): the track's real labels,
the same labels shuffled across the training images (Cap-shuffled), the kinds present (Img-kinds: whole-image
multi-label classes), or distances between the frozen initial trunk's own features (Img-self: labels that add
nothing); then the label-distance floor (``train.label_floor``). Every row of a study shares its images, trunk
start and settings, so a control row differs from the Cap row in its labels alone. Graphs built here break
equal distances in an order drawn from the study's seed, never by image id.
"""
from __future__ import annotations

from typing import Callable

import numpy as np

from embedder.labels.floor import FlooredSpace, floor_value, floored_graph, zero_count
from embedder.labels.frozen_embedding import FrozenEmbeddingSpace
from embedder.labels.graph import build_graph_bruteforce
from embedder.labels.kinds import KindsSpace
from embedder.labels.shuffled import ShuffledSpace, shuffled_graph, single_cycle


def row_labels(track, cfg, which: str = "real",
               init_features: Callable[[], tuple[np.ndarray, str]] | None = None) -> tuple[object, np.ndarray]:
    """(label space, neighbour indices [N, M]) of the training images for a row with ``method.labels`` =
    ``which``; built once per study and kind (the shuffle's permutation and the tie order come from
    ``cfg.seed``). ``init_features()`` gives the frozen initial trunk's pooled features of the training images
    and what computed them (``labels: self`` only)."""
    memo = track.row_labels
    if which not in memo:
        space, graph = track.train_space, track.graph
        if which == "shuffled":
            owner = single_cycle(len(space), cfg.seed)
            space, graph = ShuffledSpace(space, owner, cfg.seed), shuffled_graph(graph, owner)
        elif which in ("kinds", "self"):
            space = KindsSpace(track.train_bank.records) if which == "kinds" else FrozenEmbeddingSpace(*init_features())
            graph = build_graph_bruteforce(space, cfg.graph.m, progress=False, tie_seed=cfg.seed)
        floor = floor_value(cfg.train.label_floor, graph)
        print(f"labels ({which}): {zero_count(graph)} of {graph.nn_dist.size} neighbour distances are 0 (identical "
              "labels); " + (f"floored at {floor:.4g} (train.label_floor {cfg.train.label_floor})" if floor is not None
                             else "no floor (train.label_floor none)"))
        if floor is not None:
            space, graph = FlooredSpace(space, floor), floored_graph(graph, floor)
        memo[which] = (space, graph.nn_idx)
    return memo[which]
