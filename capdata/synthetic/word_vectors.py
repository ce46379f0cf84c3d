"""Stand-in pretrained word vectors for shapes-captions, written as word2vec text (GoogleNews' format).

Why: Kim et al. measure caption distances with WMD over *pretrained* vectors (Kusner et al. use
GoogleNews word2vec), in which "red" and "blue" are related but distinct, and synonyms are close.
Word2Vec trained on the demo's 6,000 templated captions cannot learn that: every colour word fills the
same slot, so on the sweep set it put red and blue at cosine .93 and left and right at .99, and the caption distance
measured sentence form instead of content: on the independent sweep set, ranking images by their
scenes' ground-truth attributes closed at most 29% of the random-to-Oracle nDCG@10 gap under those
labels, and 65% under these (``studies/caption_labels/caption_label_ceiling.py``). These vectors give each meaning its
own direction: words of one kind (colours, shapes, counts, ...) share a component (cosine ~.5, as related
words do in pretrained vectors), synonyms and plurals share their meaning's vector (cosine ~.9).

Filler words ("a", "the", "there", "is", "image", "of", ...) get no vector, so WMD drops them as
out-of-vocabulary words, as GoogleNews' vectors lack "a", "and", "of" and "to". The vectors are the
same for every dataset seed: one "language", as one pretrained file serves every COCO experiment.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np

import capdata.synthetic.lexicon as lexicon
from capdata.synthetic.drawing import write_bytes

DIM = 50
SEED = 0
KIND_WEIGHT, MEANING_WEIGHT, WORD_WEIGHT = 1.0, 1.0, 0.35
"""A word = kind * u_kind + meaning * u_meaning + word * u_word, u random unit vectors: two meanings of
one kind meet at cosine ~1/2, two words of one meaning at ~(1 + 1) / (1 + 1 + .35^2) = .94."""

FILLERS = frozenset("a an the of is are there this we see image picture shows showing with and including "
                    "some among against on in at to".split())
"""Words the captions use without content: no vector (out of vocabulary, so WMD drops them)."""


def _words(phrases) -> list[str]:
    """The content words of some phrases, each once, in order ("plus sign", "plus signs" -> plus, sign, signs)."""
    return list(dict.fromkeys(w for p in phrases for w in p.split() if w not in FILLERS))


def vocabulary() -> dict[str, dict[str, list[str]]]:
    """kind -> meaning -> its words, built from the generator's own word tables (no list to keep in step)."""
    colours = {c: _words(ws) for c, ws in {**lexicon.COLOUR_WORDS, **lexicon.BACKGROUND_WORDS}.items()}
    shapes = {s: _words(w for pair in pairs for w in pair) for s, pairs in lexicon.SHAPE_WORDS.items()}
    shapes["thing"] = _words(w for pair in lexicon.GENERIC_NOUNS for w in pair)
    return {
        "colour": colours,
        "shape": shapes,
        "size": {s: _words(ws) for s, ws in lexicon.SIZE_WORDS.items()},
        "count": {str(n): _words(ws) for n, ws in lexicon.COUNT_WORDS.items()},  # "a" is a filler: 1 -> one, single
        "place": {"left": ["left"], "right": ["right"], "top": ["top"], "bottom": ["bottom"],
                  "middle": ["middle", "center"], "corner": ["corner"], "above": ["above"], "below": ["below"],
                  "next": ["next", "beside"]},
        "kind": {"same": ["same", "another"], "different": ["different"], "colour word": ["color", "colors"],
                 "other": ["other", "more"], "background": ["background"]},
    }


def make_vectors(dim: int = DIM, seed: int = SEED) -> dict[str, np.ndarray]:
    """word -> float64 [dim] vector (not unit length; WMD normalises)."""
    rng = np.random.default_rng(seed)

    def unit() -> np.ndarray:
        v = rng.normal(size=dim)
        return v / np.linalg.norm(v)

    out: dict[str, np.ndarray] = {}
    for meanings in vocabulary().values():
        kind = unit()
        for words in meanings.values():
            meaning = KIND_WEIGHT * kind + MEANING_WEIGHT * unit()
            for w in words:
                if w in out:
                    raise ValueError(f"word {w!r} has two meanings in the synthetic vocabulary")
                out[w] = meaning + WORD_WEIGHT * unit()
    return out


def write_word_vectors(path: str | Path, dim: int = DIM, seed: int = SEED) -> Path:
    """word2vec text format ("<count> <dim>" then "word v1 ... vd" per line); same arguments, same bytes."""
    path = Path(path)
    vecs = make_vectors(dim, seed)
    lines = [f"{len(vecs)} {dim}"] + [w + " " + " ".join(f"{x:.6f}" for x in v) for w, v in vecs.items()]
    write_bytes(path, ("\n".join(lines) + "\n").encode("ascii"))
    return path
