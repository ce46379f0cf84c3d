"""The caption label space: Kim et al.'s Eq. 13 over Word Mover's Distance, between two images' caption sets.

D(X, Y) = sum over X's captions of the smallest WMD to a caption of Y, plus the same from Y to X. Pair
WMDs are cached; ``pairwise`` gives the label distances a training batch needs. Its exact neighbour
graph at COCO scale is ``caption_graph.build_caption_graph``.
"""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

import numpy as np

from capcore.errors import CapawareError
from capdata.records import CaptionRecords
from embedder.labels.wmd import EMPTY_WMD, prepare_captions, wmd
from embedder.labels.wordvecs import tokenize


class CaptionSpace:
    """LabelSpace over N images: D = W(X, Y) of Eq. 13, WMD between each image's captions.

    Light and picklable (word ids, weights, the used words' unit vectors), so data-loader workers can
    compute D for random batch members on the fly. Caption-pair WMDs and image-pair distances are
    memoised in bounded dicts that are not pickled: a study's rows draw the same seeded batches, and a
    head warm-up draws the first steps' batches again, so most of a study's distances repeat (the demo's
    three caption rows: 750 batches' distances, 150 distinct).
    """

    name = "caption_wmd"

    def __init__(self, captions: Sequence[Sequence[str | Sequence[str]]], kv, *, stopwords: str = "gensim",
                 vector_source: str = "", cache_size: int = 200_000):
        if any(len(c) == 0 for c in captions):
            bad = next(i for i, c in enumerate(captions) if len(c) == 0)
            raise CapawareError(f"captions[{bad}]", "image has no captions", "drop captionless images first")
        flat = [s for caps in captions for s in caps]
        self.img_ptr = np.zeros(len(captions) + 1, dtype=np.int64)
        np.cumsum([len(c) for c in captions], out=self.img_ptr[1:])
        self.prep = prepare_captions(flat, kv, stopwords)
        self.stopwords = stopwords
        self.vector_source = vector_source
        self.vector_dim = int(kv.vector_size)
        digest = hashlib.sha256()
        for caps in captions:
            digest.update(json.dumps([tokenize(s) for s in caps]).encode())
        self.captions_sha256 = digest.hexdigest()
        vec = hashlib.sha256("\n".join(self.prep.words).encode())
        vec.update(np.ascontiguousarray(self.prep.vectors).tobytes())
        self.vectors_sha256 = vec.hexdigest()
        self.cache_size = cache_size
        self._cache: dict[int, float] = {}
        self._set_cache: dict[int, float] = {}

    @classmethod
    def from_records(cls, records: CaptionRecords, kv, **kwargs) -> "CaptionSpace":
        return cls(records.captions, kv, **kwargs)

    def __len__(self) -> int:
        return len(self.img_ptr) - 1

    def __getstate__(self):
        state = dict(self.__dict__)
        state["_cache"], state["_set_cache"] = {}, {}
        return state

    def captions_of(self, i: int) -> np.ndarray:
        return np.arange(self.img_ptr[i], self.img_ptr[i + 1])

    def _remember(self, cache: dict, key: int, value: float) -> float:
        """Store ``value`` in a bounded memo (the oldest quarter is dropped when full)."""
        if len(cache) >= self.cache_size:
            for old in list(cache)[: max(1, self.cache_size // 4)]:
                del cache[old]
        cache[key] = value
        return value

    def pair_wmd(self, x: int, y: int) -> float:
        """WMD between flat captions ``x`` and ``y``, memoised."""
        key = min(x, y) * len(self.prep) + max(x, y)
        hit = self._cache.get(key)
        return self._remember(self._cache, key, wmd(self.prep, x, y)) if hit is None else hit

    def distance(self, a: int, b: int) -> float:
        """W(X_a, X_b) of Eq. 13, exactly (float64), memoised (symmetric)."""
        if a == b:
            return 0.0
        key = min(a, b) * len(self) + max(a, b)
        hit = self._set_cache.get(key)
        if hit is not None:
            return hit
        xs, ys = self.captions_of(a), self.captions_of(b)
        pair = np.array([[self.pair_wmd(x, y) for y in ys] for x in xs])
        return self._remember(self._set_cache, key, float(pair.min(axis=1).sum() + pair.min(axis=0).sum()))

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        rows, cols = np.asarray(rows).ravel(), np.asarray(cols).ravel()
        out = np.empty((len(rows), len(cols)), dtype=np.float32)
        for r, a in enumerate(rows):
            for c, b in enumerate(cols):
                out[r, c] = self.distance(int(a), int(b))
        return out

    def params(self) -> dict:
        return {"distance": "Kim et al. Eq. 13 over WMD of unit word vectors", "stopwords": self.stopwords,
                "vector_source": self.vector_source, "vector_dim": self.vector_dim,
                "vocab_used": len(self.prep.words), "vectors_sha256": self.vectors_sha256,
                "captions_sha256": self.captions_sha256, "empty_caption_wmd": EMPTY_WMD}


# ---------------------------------------------------------------------------------------------
# exact top-M search with lower-bound pruning
