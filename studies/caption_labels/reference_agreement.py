"""How well does one human-style reference score against the others? A bound on what captioners can reach.

``python -m studies.caption_labels.reference_agreement DATA/dataset_coco.json [--split test]``

Each of an image's five references in turn is scored as the caption, against the other four, with the
metrics of Table 1 (``eval.score_captions.score_captions``, PTB tokenizer; METEOR and SPICE off); printed per held-out
position and on average. A captioner trained with XE learns the references' consensus and can beat this
figure; a feature set can only add what that consensus says about the image.
"""
from __future__ import annotations

import argparse

import numpy as np

from capcore.errors import CapawareError, run_cli
from capdata.captions import in_split, read_captions
from eval.score_captions import score_captions


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("karpathy")
    parser.add_argument("--split", default="test")
    parser.add_argument("--format", default=None, help="the caption file's format [found from the file]")
    a = parser.parse_args(argv)
    records = read_captions(a.karpathy, a.format)
    chosen = in_split(records, a.split)
    n_refs = min((len(records.raw[i]) for i in chosen), default=0)
    if n_refs < 2:
        raise CapawareError(a.karpathy, f"split {a.split!r} has no image with two references or more",
                            "give a caption file with several references per image")
    rows = []
    ids = [int(records.image_ids[i]) for i in chosen]
    for k in range(n_refs):
        preds = {image_id: records.raw[i][k] for image_id, i in zip(ids, chosen)}
        refs = {image_id: [r for j, r in enumerate(records.raw[i][:n_refs]) if j != k]
                for image_id, i in zip(ids, chosen)}
        m = score_captions(preds, refs, meteor=False, spice=False).metrics
        rows.append((m["CIDEr-D"], m["BLEU-4"]))
        print(f"reference {k + 1} against the other {n_refs - 1}: CIDEr-D {m['CIDEr-D']:.3f}, BLEU-4 {m['BLEU-4']:.4f}")
    c, b = np.mean(rows, 0)
    print(f"mean over {len(chosen)} {a.split} images: CIDEr-D {c:.3f}, BLEU-4 {b:.4f}")


if __name__ == "__main__":
    run_cli(main)
