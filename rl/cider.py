"""CIDEr-D as a reward: pycocoevalcap's numbers, on token ids, with training-set document frequencies,
for a whole batch at once.

What is computed is exactly pycocoevalcap's ``CiderScorer`` (n-grams 1..4, tf-idf vectors, clipped
products ``min(h, r) * r``, cosine per n, Gaussian length penalty with sigma 6, mean over n and over
the references, x10), with two choices made the way SCST needs them (Rennie et al. 2017; self-critical
.pytorch's "coco-train" CIDEr-D):

- document frequencies and ``ref_len = log(#documents)`` come once from the training references
  (one document = one image's set of captions), not from the batch, so a caption's reward does not
  depend on which other images share its batch; they are cached in a small HDF5 file tied to the
  labels file by its sha256 (:func:`load_or_build_doc_freq`);
- captions are token-id rows; everything after the first 0 (EOS / pad) is ignored. Whether the EOS
  itself counts is the ``eos`` choice of the document frequencies (SacreEOS, Barraco et al. 2023):
  with ``eos=True`` (rl.reward.eos, the default) it is one more word, as self-critical.pytorch's
  ``array_to_str`` writes "12 7 0" and its ``prepro_ngrams.py`` appends ``<eos>`` to every reference,
  so "court <eos>" pays only a caption that really ends there; a row with no 0 (it filled all T slots)
  gets no end token, as there. The EOS is word id V + 1 here (ids 1..V are words).
  With ``eos=False`` the EOS is not a word and the reward is the CIDEr-D of the caption string
  captioners.predict writes; SCST on that reward can learn to stop mid-phrase for free.

pycocoevalcap quirks kept on purpose, because "the same numbers" is the contract: the length in the
penalty is the number of *bigrams* (``max(words - 1, 0)``: its ``if n == 1`` counts 2-grams), and a
cosine whose norm is zero is left unnormalised (it is 0 anyway).

Speed: n-grams of every caption in the batch (candidates and their references) are packed into
int64 keys (bijective base V+1 digits: word ids are 1..V inside a caption), counted with one
``np.unique``, and matched candidate-to-reference with one sorted join; no Python loop over captions.
benchmarks/cider_reference.py runs pycocoevalcap's own scorer with the same document frequencies, for
the tests and benchmarks/bench_scst.py (it is no part of this package).
"""
from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from capcore.atomic import atomic_path
from capcore.checkpoint import file_sha256
from capcore.errors import CapawareError
from captioners.prepro import Labels, read_labels
from rl.bleu import sentence_bleu
from rl.ngrams import N, _check_base, _ranges, image_ngram_keys, ngram_table
from rl.ngrams import with_end_token  # noqa: F401  (re-exported: callers write end tokens through rl.cider)

SIGMA = 6.0  # Gaussian length penalty (CIDEr-D)
DF_FORMAT = "capaware-cider-df-v2"  # v2: records whether the EOS is a word


@dataclass
class DocFreq:
    """Document frequencies of n-grams over a reference corpus (one document per image)."""
    keys: np.ndarray  # [K] sorted int64 n-gram keys
    counts: np.ndarray  # [K] images whose captions contain the n-gram
    n_docs: int
    base: int  # alphabet of the keys: V + 1 (word ids 1..V), V + 2 with the end token V + 1
    n: int = N
    eos: bool = False  # the end token is a word of every caption (module docstring)

    @property
    def end_token(self) -> int | None:
        """The id the EOS is written as (V + 1), or None when it is not a word."""
        return self.base - 1 if self.eos else None

    @property
    def variant(self) -> str:
        return eos_variant(self.eos)

    @property
    def ref_len(self) -> float:
        """pycocoevalcap's ``ref_len``: log of the number of documents."""
        return float(np.log(float(self.n_docs)))

    def lookup(self, keys: np.ndarray) -> np.ndarray:
        if len(self.keys) == 0:
            return np.zeros(len(keys), dtype=np.int64)
        pos = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        return np.where(self.keys[pos] == keys, self.counts[pos], 0)


def eos_variant(eos: bool) -> str:
    return "with the end token" if eos else "without the end token"


def build_doc_freq(labels: Labels, base: int, split: str = "train", n: int = N, chunk: int = 20000,
                   eos: bool = False) -> DocFreq:
    """Document frequencies from the captions of ``split``'s images (in chunks: bounded memory on COCO).

    ``base`` is V + 1 for V words; with ``eos`` every reference that ends inside labels.h5's width gets
    the end token V + 1 and the keys' alphabet becomes V + 2. (self-critical.pytorch's prepro_ngrams.py
    counts untruncated references; labels.h5 holds them cut at max_length, as its reward's references are.)
    """
    end = base if eos else None
    base = base + 1 if eos else base
    _check_base(base, n)
    images = np.flatnonzero(labels.splits == split)
    if len(images) == 0:
        raise CapawareError(labels.path, f"no {split} images to count document frequencies on",
                            "the reward's document frequencies come from the training split")
    parts = []
    for s in range(0, len(images), chunk):
        ii = images[s:s + chunk]
        counts = labels.end_ix[ii] - labels.start_ix[ii]
        owner = np.repeat(np.arange(len(ii)), counts)
        rows = labels.labels[_ranges(labels.start_ix[ii], counts)]
        tab = ngram_table(with_end_token(rows, end) if eos else rows, base, n)
        K = max(len(tab.keys), 1)
        docs = np.unique(owner[tab.row] * K + tab.dense)  # distinct (image, n-gram) pairs
        parts.append(tab.keys[docs % K])
    keys, counts = np.unique(np.concatenate(parts), return_counts=True)
    return DocFreq(keys, counts.astype(np.int64), len(images), base, n, eos)


def doc_freq_path(labels_path: str | Path, split: str = "train", eos: bool = False) -> Path:
    return Path(labels_path).with_name(f"cider_df_{split}{'_eos' if eos else ''}.h5")


def load_or_build_doc_freq(labels_path: str | Path, split: str = "train", cache: str | Path | None = None,
                           n: int = N, eos: bool = False) -> DocFreq:
    """The cached document frequencies of ``labels_path``'s ``split``, rebuilt when the labels changed.

    The cache's attributes name the labels file's sha256, the split, n and the EOS variant, so a stale
    cache (prepro rerun, another dataset) is never used. A cache of the other EOS variant is refused:
    the two rewards are not comparable (SacreEOS), and silently overwriting a file a concurrent run of
    the other variant reads would change that run's reward under it.
    """
    labels_path = Path(labels_path)
    cache = Path(cache) if cache else doc_freq_path(labels_path, split, eos)
    sha = file_sha256(labels_path)
    if cache.is_file():
        try:
            with h5py.File(cache, "r") as f:
                a = f.attrs
                if a.get("format") == DF_FORMAT and bool(a.get("eos")) != eos:
                    raise CapawareError(cache, f"holds CIDEr-D document frequencies {eos_variant(not eos)}, "
                                        f"but this run's reward.eos is {str(eos).lower()}",
                                        "delete the file, or point reward.df_cache at another one")
                if (a.get("format"), a.get("labels_sha256"), a.get("split"), int(a.get("n", -1))) == \
                        (DF_FORMAT, sha, split, n):
                    return DocFreq(f["keys"][:], f["counts"][:], int(a["n_docs"]), int(a["base"]), n, eos)
        except OSError:
            pass  # unreadable (half-copied): rebuilt below
    labels = read_labels(labels_path)
    with h5py.File(labels_path, "r") as f:
        base = int(f.attrs["vocab_size"]) + 1
    df = build_doc_freq(labels, base, split, n, eos=eos)
    with atomic_path(cache) as tmp, h5py.File(tmp, "w") as f:
        f.create_dataset("keys", data=df.keys)
        f.create_dataset("counts", data=df.counts)
        f.attrs.update(format=DF_FORMAT, labels_sha256=sha, labels=str(labels_path.resolve()), split=split, n=n,
                       n_docs=df.n_docs, base=df.base, eos=eos)
    return df


def cider_d(cands: np.ndarray, cand_group: np.ndarray, refs: np.ndarray, ref_group: np.ndarray, df: DocFreq,
            sigma: float = SIGMA) -> np.ndarray:
    """CIDEr-D of each candidate row against the reference rows of its group -> [M] float64.

    ``cands`` [M, T] and ``refs`` [R, T'] are token ids (0 ends a caption); ``cand_group`` [M] and
    ``ref_group`` [R] say which image each row belongs to (small non-negative integers).
    """
    cands, refs = np.asarray(cands, np.int64), np.asarray(refs, np.int64)
    cand_group, ref_group = np.asarray(cand_group, np.int64), np.asarray(ref_group, np.int64)
    M = len(cands)
    if M == 0:
        return np.zeros(0)
    sort = np.argsort(ref_group, kind="stable")
    refs, ref_group = refs[sort], ref_group[sort]
    n_groups = int(max(cand_group.max(), ref_group.max() if len(ref_group) else 0)) + 1
    n_refs = np.bincount(ref_group, minlength=n_groups)
    if (n_refs[cand_group] == 0).any():
        raise ValueError("every candidate needs at least one reference caption of its image")
    ref_start = np.cumsum(n_refs) - n_refs
    T = max(cands.shape[1], refs.shape[1])
    rows = np.concatenate([np.pad(cands, ((0, 0), (0, T - cands.shape[1]))),
                           np.pad(refs, ((0, 0), (0, T - refs.shape[1])))])
    n = df.n
    tab = ngram_table(rows, df.base, n)
    idf = df.ref_len - np.log(np.maximum(1.0, df.lookup(tab.keys).astype(np.float64)))
    vec = tab.count * idf[tab.dense]  # tf-idf of each (caption, n-gram)
    order = tab.order[tab.dense].astype(np.int64)
    norm = np.sqrt(np.bincount(tab.row * n + order, weights=vec ** 2, minlength=len(rows) * n)).reshape(-1, n)
    length = np.maximum(tab.lengths - 1, 0).astype(np.float64)  # pycocoevalcap's length: bigram count

    # join candidate n-grams to the same n-grams of the references of the same image
    join, is_cand = image_ngram_keys(tab, M, cand_group, ref_group)
    ref_e = np.flatnonzero(~is_cand)
    ref_e = ref_e[np.argsort(join[ref_e], kind="stable")]
    cand_e = np.flatnonzero(is_cand)
    lo = np.searchsorted(join[ref_e], join[cand_e], "left")
    hits = np.searchsorted(join[ref_e], join[cand_e], "right") - lo
    c_idx = np.repeat(cand_e, hits)
    r_idx = ref_e[_ranges(lo, hits)]
    c_row, r_row = tab.row[c_idx], tab.row[r_idx] - M
    j = r_row - ref_start[ref_group[r_row]]  # which reference of its image
    R = int(n_refs.max())
    h, r = vec[c_idx], vec[r_idx]
    num = np.bincount((c_row * R + j) * n + order[c_idx], weights=np.minimum(h, r) * r,
                      minlength=M * R * n).reshape(M, R, n)

    # cosine per (candidate, reference, n), length penalty, mean over n, mean over references
    slot = np.arange(R)[None, :]
    valid = slot < n_refs[cand_group][:, None]
    ref_row = np.where(valid, ref_start[cand_group][:, None] + slot, 0) + M
    norm_h, norm_r = norm[:M][:, None, :], norm[ref_row]
    both = (norm_h != 0) & (norm_r != 0)
    val = np.where(both, num / np.where(both, norm_h * norm_r, 1.0), num)
    delta = length[:M][:, None] - length[ref_row]
    val = val * (np.e ** (-(delta ** 2) / (2 * sigma ** 2)))[..., None]
    val = np.where(valid[..., None], val, 0.0)
    return val.sum(1).mean(1) / n_refs[cand_group] * 10.0


class CiderReward:
    """CIDEr-D of sampled captions against their training image's references in labels.h5, plus
    ``bleu4_weight`` x their sentence BLEU-4 (rl/bleu.py; self-critical.pytorch's ``bleu_reward_weight``,
    0 by default there and here), both over the same word ids and end tokens.

    References are the labels' captions (truncated to max_length, rare words as UNK): the same word
    ids the candidates are made of, as in self-critical.pytorch.
    """

    def __init__(self, labels: Labels, df: DocFreq, sigma: float = SIGMA, bleu4_weight: float = 0.0):
        _check_base(df.base, df.n)
        self.labels, self.df, self.sigma, self.bleu4_weight = labels, df, sigma, bleu4_weight
        # every reference with its end token, written once here rather than at every step
        self.refs = with_end_token(labels.labels, df.end_token) if df.eos else labels.labels

    def __call__(self, seqs, label_ix) -> np.ndarray:
        """``seqs`` [M, T] token ids (tensor or array), ``label_ix`` [M] row of each one's image in labels."""
        if hasattr(seqs, "detach"):
            seqs = seqs.detach().cpu().numpy()
        images, group = np.unique(np.asarray(label_ix, np.int64), return_inverse=True)
        counts = self.labels.end_ix[images] - self.labels.start_ix[images]
        refs = self.refs[_ranges(self.labels.start_ix[images], counts)]
        if self.df.eos:
            seqs = with_end_token(seqs, self.df.end_token)
        ref_group = np.repeat(np.arange(len(images)), counts)
        score = cider_d(seqs, group, refs, ref_group, self.df, self.sigma)
        if self.bleu4_weight:
            score = score + self.bleu4_weight * sentence_bleu(seqs, group, refs, ref_group, self.df.base)
        return score

    def together(self, *parts) -> list[np.ndarray]:
        """The rewards of several ``(seqs, label_ix)`` pairs (an SCST step's samples and greedy captions)
        in one call: one n-gram table for all of them, and each image's references joined once."""
        parts = [(s.detach().cpu().numpy() if hasattr(s, "detach") else np.asarray(s), np.asarray(ix))
                 for s, ix in parts]
        width = max(s.shape[1] for s, _ in parts)
        seqs = np.concatenate([np.pad(s, ((0, 0), (0, width - s.shape[1]))) for s, _ in parts])
        scores = self(seqs, np.concatenate([ix for _, ix in parts]))
        return np.split(scores, np.cumsum([len(s) for s, _ in parts])[:-1])

