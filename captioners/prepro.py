"""Vocabulary and label file from a Karpathy json: ``python -m captioners.prepro --json FILE --out DIR``.

Written files (docs/design.md)::

    DIR/vocab.json  {"ix_to_word": {"1": "a", "2": "on", ..., "V": "UNK"}, "unk": "UNK",
                     "word_count_threshold": 5, "max_length": 16, "source": "/abs/dataset_coco.json"}
    DIR/labels.h5   labels         [M, max_length] int32   word ids, 0-padded (0 = pad / end of caption)
                    label_length   [M] int32               tokens kept (<= max_length)
                    label_start_ix [N] int64               image i's captions are rows start_ix[i]:end_ix[i]
                    label_end_ix   [N] int64               (0-based, end exclusive; self-critical.pytorch
                                                           uses 1-based inclusive, we do not)
                    image_id       [N] int64               cocoid (imgid for Flickr), the key into feats.h5
                    split          [N] bytes               train | val | test (Karpathy restval -> train)
                    karpathy_split [N] bytes               the json's own split name
                    attrs: format, vocab_size, max_length, word_count_threshold, source

The vocabulary is counted on the training split only (train + restval), so validation and test words
never leak into it; words seen <= threshold times there become UNK. Ids are ordered by count, then
alphabetically, so the same json always gives the same files.
"""
from __future__ import annotations

import argparse
import json
from collections import Counter
from dataclasses import dataclass
from pathlib import Path

import h5py
import numpy as np

from capcore.atomic import atomic_path, write_text
from capcore.errors import CapawareError, run_cli
from capcore.h5read import read_h5
from capdata.captions import read_captions, train_splits

UNK = "UNK"
LABELS_FORMAT = "capaware-labels-v1"


def build_vocab(captions: list[list[str]], threshold: int) -> list[str]:
    """Words seen more than ``threshold`` times, most frequent first; UNK last. Index 0 is reserved."""
    counts = Counter(w for toks in captions for w in toks)
    words = sorted((w for w, c in counts.items() if c > threshold and w != UNK), key=lambda w: (-counts[w], w))
    return words + [UNK]


def encode(tokens: list[str], word_to_ix: dict[str, int], max_length: int) -> np.ndarray:
    out = np.zeros(max_length, dtype=np.int32)
    unk = word_to_ix[UNK]
    for t, w in enumerate(tokens[:max_length]):
        out[t] = word_to_ix.get(w, unk)
    return out


def decode_sequence(ix_to_word: list[str], seq) -> str:
    """Word ids -> caption string, stopping at the first 0 (end of caption)."""
    words = []
    for ix in seq:
        ix = int(ix)
        if ix == 0:
            break
        words.append(ix_to_word[ix])
    return " ".join(words)


def read_vocab(path: str | Path) -> list[str]:
    """``vocab.json`` -> list indexed by word id; entry 0 is '' (pad/end)."""
    path = Path(path)
    if not path.is_file():
        raise CapawareError(path, "vocabulary not found", "run python -m captioners.prepro --json KARPATHY --out DIR")
    try:
        table = json.loads(path.read_text())["ix_to_word"]
        words = [""] * (len(table) + 1)
        for k, w in table.items():
            words[int(k)] = w
    except (json.JSONDecodeError, KeyError, ValueError, IndexError, TypeError):
        raise CapawareError(path, "not a capaware vocab.json (need ix_to_word with ids 1..V)",
                            "rerun python -m captioners.prepro") from None
    return words


@dataclass
class Labels:
    """labels.h5 in memory (small: a few MB for COCO)."""
    labels: np.ndarray  # [M, T] int32
    lengths: np.ndarray  # [M]
    start_ix: np.ndarray  # [N]
    end_ix: np.ndarray  # [N]
    image_ids: np.ndarray  # [N] int64
    splits: np.ndarray  # [N] str
    max_length: int
    path: Path

    def captions_of(self, i: int) -> np.ndarray:
        return self.labels[self.start_ix[i]:self.end_ix[i]]


def read_labels(path: str | Path) -> Labels:
    path = Path(path)

    def read(f) -> Labels:
        if f.attrs.get("format") != LABELS_FORMAT:
            raise CapawareError(path, "not a capaware labels.h5 (format attribute missing)",
                                "rerun python -m captioners.prepro")
        return Labels(labels=f["labels"][:], lengths=f["label_length"][:], start_ix=f["label_start_ix"][:],
                      end_ix=f["label_end_ix"][:], image_ids=f["image_id"][:].astype(np.int64),
                      splits=f["split"][:].astype(str), max_length=int(f.attrs["max_length"]), path=path)

    return read_h5(path, read, "labels file", "run python -m captioners.prepro --json KARPATHY --out DIR",
                   "rerun python -m captioners.prepro")


def prepro(json_path: str | Path, out_dir: str | Path, threshold: int = 5, max_length: int = 16,
           fmt: str | None = None) -> dict:
    """Write vocab.json and labels.h5 under ``out_dir``; returns a summary dict."""
    if threshold < 0 or max_length < 1:
        raise CapawareError("prepro", f"threshold={threshold}, max_length={max_length}",
                            "threshold >= 0 and max_length >= 1")
    records = read_captions(json_path, fmt)
    out_dir = Path(out_dir)
    train = np.isin(records.splits, train_splits(records))
    train_caps = [toks for i in np.flatnonzero(train) for toks in records.captions[i]]
    if not train_caps:
        raise CapawareError(json_path, "no train/restval images to build the vocabulary from",
                            "the json needs images with split train or restval")
    vocab = build_vocab(train_caps, threshold)
    word_to_ix = {w: i + 1 for i, w in enumerate(vocab)}
    if len(set(records.image_ids.tolist())) != len(records):
        raise CapawareError(json_path, "image ids (cocoid/imgid) are not unique", "fix the json: one entry per image")

    rows, lengths, start, end = [], [], [], []
    for caps in records.captions:
        start.append(len(rows))
        for toks in caps:
            rows.append(encode(toks, word_to_ix, max_length))
            lengths.append(min(len(toks), max_length))
        end.append(len(rows))
    labels = np.stack(rows)
    splits = np.where(train, "train", records.splits)

    with atomic_path(out_dir / "labels.h5") as tmp:
        with h5py.File(tmp, "w") as f:
            f.create_dataset("labels", data=labels)
            f.create_dataset("label_length", data=np.asarray(lengths, dtype=np.int32))
            f.create_dataset("label_start_ix", data=np.asarray(start, dtype=np.int64))
            f.create_dataset("label_end_ix", data=np.asarray(end, dtype=np.int64))
            f.create_dataset("image_id", data=records.image_ids.astype(np.int64))
            f.create_dataset("split", data=np.char.encode(splits.astype(str), "ascii"))
            f.create_dataset("karpathy_split", data=np.char.encode(records.splits.astype(str), "ascii"))
            f.attrs.update(format=LABELS_FORMAT, vocab_size=len(vocab), max_length=max_length,
                           word_count_threshold=threshold, source=str(Path(json_path).resolve()))
    write_text(out_dir / "vocab.json", json.dumps({
        "ix_to_word": {str(i + 1): w for i, w in enumerate(vocab)}, "unk": UNK,
        "word_count_threshold": threshold, "max_length": max_length, "source": str(Path(json_path).resolve()),
    }, indent=1))

    n_tokens = sum(len(t) for t in train_caps)
    n_unk = sum(1 for t in train_caps for w in t if w not in word_to_ix)
    return {"vocab_size": len(vocab), "images": {s: int((splits == s).sum()) for s in ("train", "val", "test")},
            "captions": len(rows), "unk_rate_train": n_unk / max(n_tokens, 1),
            "truncated": float(np.mean([len(t) > max_length for caps in records.captions for t in caps]))}


def ensure_prepro(data) -> tuple[Path, Path]:
    """labels.h5 + vocab.json under ``data.prepro_dir``, written from ``data.json`` on first use (every
    trainer calls this); the files' settings must agree with the config's."""
    out = Path(data.prepro_dir)
    labels, vocab = out / "labels.h5", out / "vocab.json"
    if not (labels.is_file() and vocab.is_file()):
        summary = prepro(data.json, out, data.word_count_threshold, data.max_length, data.format)
        print(f"prepro: {summary['vocab_size']} words, {summary['captions']} captions -> {out}")
    meta = json.loads(vocab.read_text())
    source = meta.get("source")
    if source and data.json and Path(data.json).is_file() and Path(source) != Path(data.json).resolve():
        raise CapawareError(vocab, f"made from {source}, but data.json is {data.json}",
                            f"delete {out} (it is rewritten) or point data.prepro_dir elsewhere")
    if (meta.get("word_count_threshold"), meta.get("max_length")) != (data.word_count_threshold, data.max_length):
        raise CapawareError(vocab, f"written with threshold {meta.get('word_count_threshold')}, max_length "
                            f"{meta.get('max_length')}; the config asks {data.word_count_threshold}, {data.max_length}",
                            f"delete {out} (it is rewritten) or make data.word_count_threshold/max_length agree")
    return labels, vocab


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--json", required=True, help="Karpathy dataset_*.json")
    parser.add_argument("--out", required=True, help="folder for vocab.json and labels.h5")
    parser.add_argument("--threshold", type=int, default=5, help="words seen <= this often -> UNK (default 5)")
    parser.add_argument("--max-length", type=int, default=16, help="tokens kept per caption (default 16)")
    args = parser.parse_args(argv)
    s = prepro(args.json, args.out, args.threshold, args.max_length)
    print(f"prepro: vocabulary {s['vocab_size']} words (UNK included), {s['captions']} captions, images "
          f"train {s['images']['train']} / val {s['images']['val']} / test {s['images']['test']}; "
          f"UNK rate (train) {s['unk_rate_train']:.2%}, truncated {s['truncated']:.2%} -> {args.out}")


if __name__ == "__main__":
    run_cli(main)
