"""Does a captioner look at the image? ``python -m eval.grounding RUN [--split test] [--out FILE]``.

A captioner can score a respectable CIDEr-D by writing the few captions that fit most images of a
set, whatever the image. This decodes one split three times with the same checkpoint and decoding:

    real       each image's own features
    shuffled   the same features, shuffled across the split's images (a seeded derangement: no image
               keeps its own), so the set of inputs is unchanged and only their pairing with images breaks
    zeros      all-zero features (what the language model writes with no image at all)

and reports CIDEr-D of each against the split's references, the real/shuffled ratio (about 1 when
the captions ignore the image; far above 1 when they describe it) and the number of distinct
captions. RUN is a captioner run folder (its ``best.pt``) or a checkpoint; features and labels
default to the checkpoint's own, so it works on COCO runs too. Written (default
``RUN/grounding_<split>.json``)::

    {"split", "checkpoint", "features", "seed", "method", "beam_size", "n_images",
     "cider_d": {"real", "shuffled", "zeros"}, "ratio_real_shuffled",
     "distinct": {"real", "shuffled", "zeros"}, "distinct_fraction_real",
     "most_common_real": [caption, count], "command"}

CIDEr-D is pycocoevalcap's scorer on the references' tokens (document frequencies from the split's
references), as the captioners' validation computes it; eval.score_captions (PTB tokeniser) remains the
metric of record. No captioning toolkit we know of reports this check.
"""
from __future__ import annotations

import argparse
import json
import shlex
import sys
from collections import Counter
from pathlib import Path

import numpy as np
from torch.utils.data import Dataset

from capcore.atomic import write_text
from capcore.device import pick_device
from capcore.errors import CapawareError, run_cli
from capcore.run_layout import CaptionerDir
from captioners.card import CaptionerCard
from captioners.data import CaptionDataset
from captioners.model import load_captioner
from captioners.prepro import read_labels
from captioners.validation import corpus_cider_d, generate, validation_refs

CONDITIONS = ("real", "shuffled", "zeros")


def derangement(n: int, seed: int) -> np.ndarray:
    """A seeded permutation with no fixed point: image i gets the features of image perm[i] != i."""
    if n < 2:
        raise CapawareError("split", f"{n} image(s): shuffling needs at least 2", "use a larger split")
    cycle = np.random.default_rng(seed).permutation(n)
    perm = np.empty(n, np.int64)
    perm[cycle] = np.roll(cycle, -1)  # one cycle through a random order
    return perm


class SwappedFeatures(Dataset):
    """``dataset`` with each item's features replaced: taken from item ``perm[i]``, or zeros."""

    def __init__(self, dataset: CaptionDataset, perm: np.ndarray | None):
        self.dataset, self.perm = dataset, perm

    def __len__(self) -> int:
        return len(self.dataset)

    def __getitem__(self, i: int) -> dict:
        item = dict(self.dataset[i])
        if self.perm is None:
            item["att"], item["fc"] = np.zeros_like(item["att"]), np.zeros_like(item["fc"])
        else:
            item["att"], item["fc"] = self.dataset.features(int(self.perm[i]))
        return item


def checkpoint_of(run: str | Path) -> Path:
    run = Path(run)
    path = CaptionerDir(run).best if run.is_dir() else run
    if not path.is_file():
        raise CapawareError(path, "captioner checkpoint not found", "pass a captioner run folder (with best.pt) "
                            "or a checkpoint written by captioners.xe / rl.scst")
    return path


def references(card: CaptionerCard, refs_json: str | None, labels, dataset: CaptionDataset) -> dict[int, list[str]]:
    """The split's reference captions: the Karpathy json (given, or the one the checkpoint trained on)."""
    from omegaconf import OmegaConf

    trained = OmegaConf.create(card.config or "{}")
    json_path = refs_json or OmegaConf.select(trained, "data.json") or ""
    if refs_json and not Path(refs_json).is_file():
        raise CapawareError(refs_json, "references file not found", "pass the Karpathy dataset_*.json")
    fmt = OmegaConf.select(trained, "data.format")  # a given file is read as the run's own was (or as it shows)
    return validation_refs(str(json_path), labels, dataset, list(card.vocab), fmt)


def grounding(checkpoint: str | Path, split: str = "test", features: str | None = None, labels: str | None = None,
              refs_json: str | None = None, seed: int = 0, method: str = "greedy", beam_size: int = 1,
              batch_size: int = 100, max_images: int | None = None, device: str = "auto") -> dict:
    """Decode ``split`` on real, shuffled and zero features; return the report (module docstring)."""
    dev = pick_device(device)
    checkpoint = checkpoint_of(checkpoint)
    model, card = load_captioner(checkpoint, dev)
    feats = features or card.features
    label_set = read_labels(labels or card.labels)
    dataset = CaptionDataset(feats, label_set, split, in_memory=True, max_images=max_images)
    expect = card.feature_sizes
    if (dataset.info.fc_dim, dataset.info.att_shape[1]) != expect:
        raise CapawareError(feats, f"feature sizes fc {dataset.info.fc_dim}, att {dataset.info.att_shape[1]} do not "
                            f"fit the checkpoint (fc {expect[0]}, att {expect[1]})",
                            "use features of the same backbone")
    refs = references(card, refs_json, label_set, dataset)
    vocab, max_len = list(card.vocab), int(card.max_length)
    inputs = {"real": dataset, "shuffled": SwappedFeatures(dataset, derangement(len(dataset), seed)),
              "zeros": SwappedFeatures(dataset, None)}
    preds, scores = {}, {}
    for name, data in inputs.items():
        preds[name], _ = generate(model, data, vocab, dev, batch_size, max_len, method, beam_size)
        scores[name], _ = corpus_cider_d(preds[name], refs)
    counts = {name: Counter(p.values()) for name, p in preds.items()}
    top = counts["real"].most_common(1)[0]
    return {"split": split, "checkpoint": str(checkpoint.resolve()), "features": str(Path(feats).resolve()),
            "seed": seed, "method": method, "beam_size": beam_size, "n_images": len(dataset),
            "cider_d": scores,
            "ratio_real_shuffled": scores["real"] / scores["shuffled"] if scores["shuffled"] > 0 else None,
            "distinct": {name: len(c) for name, c in counts.items()},
            "distinct_fraction_real": len(counts["real"]) / len(dataset),
            "most_common_real": [top[0], top[1]]}


def summary(report: dict) -> str:
    c, d = report["cider_d"], report["distinct"]
    ratio = report["ratio_real_shuffled"]
    return (f"grounding ({report['split']}, {report['n_images']} images): CIDEr-D real {c['real']:.3f}, "
            f"shuffled {c['shuffled']:.3f}, zeros {c['zeros']:.3f}; real/shuffled "
            f"{'inf' if ratio is None else f'{ratio:.2f}'}; distinct captions {d['real']} "
            f"({report['distinct_fraction_real']:.0%}); most common: {report['most_common_real'][0]!r} "
            f"x{report['most_common_real'][1]}")


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("run", help="captioner run folder (its best.pt) or a checkpoint")
    parser.add_argument("--split", default="test", help="train | val | test (default test)")
    parser.add_argument("--out", default=None, help="JSON to write (default RUN/grounding_<split>.json)")
    parser.add_argument("--features", default=None, help="feats.h5 (default: the checkpoint's)")
    parser.add_argument("--labels", default=None, help="labels.h5 giving the split (default: the checkpoint's)")
    parser.add_argument("--refs", default=None, help="Karpathy json of the references (default: the checkpoint's)")
    parser.add_argument("--seed", type=int, default=0, help="seed of the shuffle")
    parser.add_argument("--method", default="greedy", choices=("greedy", "beam"))
    parser.add_argument("--beam-size", type=int, default=1)
    parser.add_argument("--max-images", type=int, default=None)
    parser.add_argument("--device", default="auto")
    a = parser.parse_args(argv)
    report = grounding(a.run, a.split, a.features, a.labels, a.refs, a.seed, a.method, a.beam_size,
                       max_images=a.max_images, device=a.device)
    report["command"] = " ".join(shlex.quote(x) for x in ["python", "-m", "eval.grounding",
                                                          *(argv if argv is not None else sys.argv[1:])])
    out = Path(a.out) if a.out else Path(report["checkpoint"]).parent / f"grounding_{a.split}.json"
    write_text(out, json.dumps(report, indent=1))
    print(summary(report) + f" -> {out}")


if __name__ == "__main__":
    run_cli(main)
