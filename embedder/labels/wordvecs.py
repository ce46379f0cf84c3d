"""Word vectors for the caption label space: tokenising, stop words, training and loading.

Everything here works offline: the tokeniser is a regex (no NLTK data to download) and the stop
words are the list shipped inside gensim. Rules a caption goes through (``caption_words``):

1. lower-case, keep runs of ``[a-z0-9]`` (Karpathy tokens already look like this);
2. drop stop words and words without a vector (OOV);
3. if nothing is left, fall back to the caption *with* its stop words (still OOV-filtered), so a
   caption such as "there it is" keeps some meaning;
4. if still nothing is left, the caption is *empty*: ``embedder.labels.wmd`` gives it WMD 2.0 (the
   largest WMD possible between unit vectors) to any non-empty caption and 0 to another empty one.
"""
from __future__ import annotations

import re
import zlib
from pathlib import Path
from typing import Container, Iterable, Sequence

import numpy as np
from gensim.models import KeyedVectors, Word2Vec
from gensim.parsing.preprocessing import STOPWORDS as GENSIM_STOPWORDS

from capcore.errors import CapawareError

_TOKEN = re.compile(r"[a-z0-9]+")

STOPWORD_LISTS = {"gensim": frozenset(GENSIM_STOPWORDS), "none": frozenset()}
"""Named stop-word lists; the name is what label-space params record."""


def tokenize(text: str | Sequence[str]) -> list[str]:
    """Lower-case alphanumeric tokens of a string, or of already tokenised words (re-normalised)."""
    if not isinstance(text, str):
        text = " ".join(text)
    return _TOKEN.findall(text.lower())


def stopword_set(name: str) -> frozenset[str]:
    try:
        return STOPWORD_LISTS[name]
    except KeyError:
        raise CapawareError("stopwords", f"unknown stop-word list {name!r}",
                            f"use one of {sorted(STOPWORD_LISTS)}") from None


def caption_words(caption: str | Sequence[str], vocab: Container[str],
                  stopwords: Container[str] = STOPWORD_LISTS["gensim"]) -> list[str]:
    """The words of one caption that WMD sees (module docstring rules 1-3); may be empty (rule 4)."""
    tokens = tokenize(caption)
    kept = [t for t in tokens if t not in stopwords and t in vocab]
    if not kept:  # rule 3: a caption made only of stop words still says something
        kept = [t for t in tokens if t in vocab]
    return kept


def _stable_hash(text: str) -> int:
    """Process-independent stand-in for ``hash`` (randomised per process unless PYTHONHASHSEED is set)."""
    return zlib.crc32(text.encode("utf8"))


def train_word2vec(token_lists: Iterable[Sequence[str]], dim: int = 100, seed: int = 0, epochs: int = 20,
                   *, window: int = 5, min_count: int = 1, sg: int = 1, negative: int = 5) -> KeyedVectors:
    """Skip-gram word2vec on caption tokens, bit-for-bit repeatable for the same inputs and seed.

    gensim is only deterministic with one worker thread (threads race on the shared weights), a fixed
    ``seed`` and a ``hashfxn`` that does not change between interpreter runs; all three are pinned.
    """
    sentences = [list(t) for t in token_lists]
    if not any(sentences):
        raise CapawareError("word2vec", "no tokens to train on", "check that the captions are not empty")
    model = Word2Vec(sentences=sentences, vector_size=dim, window=window, min_count=min_count, sg=sg,
                     negative=negative, seed=seed, epochs=epochs, workers=1, hashfxn=_stable_hash)
    return model.wv


VECTOR_FORMATS = ("auto", "word2vec-bin", "word2vec-text", "glove", "kv")


def _sniff_format(path: Path) -> str:
    name = path.name.lower()
    if name.endswith((".kv", ".model")):
        return "kv"
    if name.endswith((".bin", ".bin.gz")):
        return "word2vec-bin"
    try:
        import gzip
        opener = gzip.open if name.endswith(".gz") else open
        with opener(path, "rb") as f:
            first = f.readline(1 << 20).decode("utf8").split()
    except (OSError, UnicodeDecodeError):
        return "word2vec-bin"  # not text: the C tool's binary format is the usual culprit
    if len(first) == 2 and all(p.isdigit() for p in first):
        return "word2vec-text"  # "<count> <dim>" header
    return "glove"


def load_vectors(path: str | Path, fmt: str = "auto", limit: int | None = None) -> KeyedVectors:
    """Pre-trained vectors: word2vec binary/text (with header), GloVe text (no header) or gensim .kv.

    ``fmt="auto"`` picks by extension (.bin -> binary, .kv/.model -> gensim) and otherwise by the first
    line (two integers -> word2vec text, else GloVe). ``limit`` keeps the first (most frequent) words.
    """
    path = Path(path)
    if fmt not in VECTOR_FORMATS:
        raise CapawareError(path, f"unknown word-vector format {fmt!r}", f"use one of {VECTOR_FORMATS}")
    if not path.is_file():
        raise CapawareError(path, "word-vector file not found",
                            "place the file there (e.g. GoogleNews-vectors-negative300.bin) or train vectors "
                            "on the captions with embedder.labels.wordvecs.train_word2vec")
    kind = _sniff_format(path) if fmt == "auto" else fmt
    try:
        if kind == "kv":
            kv = KeyedVectors.load(str(path), mmap="r")
            if limit is not None:
                raise CapawareError(path, "limit is not supported for .kv files", "drop limit")
        else:
            kv = KeyedVectors.load_word2vec_format(str(path), binary=kind == "word2vec-bin", limit=limit,
                                                   no_header=kind == "glove")
    except CapawareError:
        raise
    except (ValueError, UnicodeDecodeError, EOFError, OSError, KeyError, IndexError, TypeError,
            AttributeError) as err:
        raise CapawareError(path, f"cannot read as {kind} word vectors ({type(err).__name__}: {err})",
                            f"check the file is complete, or name its format with fmt= (one of {VECTOR_FORMATS})"
                            ) from None
    if not isinstance(kv, KeyedVectors) or len(kv) == 0 or kv.vectors.ndim != 2:
        raise CapawareError(path, "file holds no word vectors", "check the file")
    return kv


def unit_vectors(kv: KeyedVectors, words: Sequence[str]) -> np.ndarray:
    """float32 [len(words), d] unit vectors computed exactly as gensim's ``get_vector(norm=True)``.

    Same float32 norm and division, so our WMD agrees with ``KeyedVectors.wmdistance`` to rounding.
    """
    idx = np.array([kv.get_index(w) for w in words], dtype=np.int64)
    vecs = np.asarray(kv.vectors[idx], dtype=np.float32)
    norms = np.linalg.norm(vecs, axis=1)
    if np.any(norms == 0):
        bad = [words[i] for i in np.flatnonzero(norms == 0)[:5]]
        raise CapawareError("word vectors", f"zero-length vectors for {bad}", "drop these words from the vectors")
    return vecs / norms[:, None]
