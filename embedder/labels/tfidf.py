"""tf-idf caption label space of Gordo & Larlus (CVPR 2017), a cheap alternative to Eq. 13.

Their recipe (section 3 and "Implementation details"): merge all words of all captions of an image
into one bag of words, stem with NLTK's Snowball stemmer, weight by tf-idf with the vocabulary and
idf learned on the training images only, L2-normalise, compare with the dot product s. Choices the
paper leaves open, fixed here: tf = raw count in the merged bag, idf = log(N_train / df) (df =
training images containing the stem), no stop-word removal (idf already mutes "a", "of"), stems
unseen in training are dropped. We turn the similarity into the label distance
D = sqrt(2 - 2 s) = ||t_a - t_b|| (0 on identical bags); an image with no known stem has the zero
vector and D = sqrt(2) to every other image.
"""
from __future__ import annotations

import hashlib
import json
from typing import Sequence

import numpy as np
from scipy.sparse import csr_matrix

from capcore.errors import CapawareError
from capdata.captions import train_splits
from capdata.records import CaptionRecords
from embedder.labels.wordvecs import stopword_set, tokenize

class _Stemmer:
    """Snowball (English) with a memo: COCO has ~6M tokens but only ~25k distinct words."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.memo: dict[str, str] = {}
        if enabled:
            from nltk.stem.snowball import (
                SnowballStemmer,  # pure Python: needs no downloaded NLTK data
            )
            self.stemmer = SnowballStemmer("english")

    def __call__(self, word: str) -> str:
        if not self.enabled:
            return word
        stem = self.memo.get(word)
        if stem is None:
            stem = self.memo[word] = self.stemmer.stem(word)
        return stem


class TfidfSpace:
    """LabelSpace over N images: D = sqrt(2 - 2 <t_a, t_b>) of L2-normalised tf-idf caption bags."""

    name = "caption_tfidf"

    def __init__(self, captions: Sequence[Sequence[str | Sequence[str]]], train_mask: np.ndarray | None = None,
                 *, stem: bool = True, stopwords: str = "none"):
        n = len(captions)
        train = np.ones(n, bool) if train_mask is None else np.asarray(train_mask, bool)
        if train.shape != (n,):
            raise CapawareError("train_mask", f"has shape {train.shape}, expected ({n},)", "pass one flag per image")
        if not train.any():
            raise CapawareError("train_mask", "selects no image", "idf needs at least one training image")
        stemmer, stop = _Stemmer(stem), stopword_set(stopwords)
        bags = [[stemmer(t) for s in caps for t in tokenize(s) if t not in stop] for caps in captions]
        df: dict[str, int] = {}
        for bag, is_train in zip(bags, train):
            if is_train:
                for w in set(bag):
                    df[w] = df.get(w, 0) + 1
        self.vocab = sorted(df)
        index = {w: i for i, w in enumerate(self.vocab)}
        self.n_train = int(train.sum())
        self.idf = np.log(self.n_train / np.array([df[w] for w in self.vocab], dtype=np.float64))
        rows, cols, vals = [], [], []
        for r, bag in enumerate(bags):
            ids, counts = np.unique(np.array([index[w] for w in bag if w in index], dtype=np.int64), return_counts=True)
            rows.append(np.full(len(ids), r))
            cols.append(ids)
            vals.append(counts * self.idf[ids])
        tfidf = csr_matrix((np.concatenate(vals).astype(np.float64), (np.concatenate(rows), np.concatenate(cols))),
                           shape=(n, len(self.vocab)))
        norms = np.sqrt(np.asarray(tfidf.multiply(tfidf).sum(axis=1)).ravel())
        scale = np.divide(1.0, norms, out=np.zeros_like(norms), where=norms > 0)
        self.vectors = csr_matrix(tfidf.multiply(scale[:, None]))  # [N, V] rows of unit (or zero) norm
        self.stem, self.stopwords = stem, stopwords
        digest = hashlib.sha256()
        for caps in captions:
            digest.update(json.dumps([tokenize(s) for s in caps]).encode())
        self.captions_sha256 = digest.hexdigest()

    @classmethod
    def from_records(cls, records: CaptionRecords, splits: Sequence[str] | None = None, **kwargs) -> "TfidfSpace":
        """idf from the training images (``splits``, default the records' format's own: Karpathy's train +
        restval), as the paper learns it on training."""
        return cls(records.captions, np.isin(records.splits, list(splits or train_splits(records))), **kwargs)

    def __len__(self) -> int:
        return self.vectors.shape[0]

    def similarity(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        """float64 [len(rows), len(cols)] cosine similarity of the tf-idf bags (the paper's s)."""
        return np.asarray((self.vectors[rows] @ self.vectors[cols].T).todense())

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        rows, cols = np.asarray(rows).ravel(), np.asarray(cols).ravel()
        dist = np.sqrt(np.maximum(2.0 - 2.0 * self.similarity(rows, cols), 0.0))
        dist[rows[:, None] == cols[None, :]] = 0.0  # identical item: exactly 0, also for empty bags
        return dist.astype(np.float32)

    def params(self) -> dict:
        return {"distance": "sqrt(2 - 2 cos) of L2-normalised tf-idf bags (Gordo & Larlus 2017)",
                "tf": "raw count over the image's merged captions", "idf": "log(n_train / df)",
                "stem": "snowball-english" if self.stem else "none", "stopwords": self.stopwords,
                "n_train": self.n_train, "vocab_size": len(self.vocab), "captions_sha256": self.captions_sha256}
