"""How well does one human-style reference score against the others? A bound on what captioners can reach.

``python scripts/reference_agreement.py DATA/dataset_coco.json [--split test]``

Each of an image's five references in turn is scored as the caption, against the other four, with the
metrics of Table 1 (``eval.score_captions.score_captions``, PTB tokenizer; METEOR and SPICE off); printed per held-out
position and on average. A captioner trained with XE learns the references' consensus and can beat this
figure; a feature set can only add what that consensus says about the image.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from capcore.errors import CapawareError, run_cli  # noqa: E402
from eval.score_captions import score_captions  # noqa: E402


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("karpathy")
    parser.add_argument("--split", default="test")
    a = parser.parse_args(argv)
    images = [im for im in json.loads(Path(a.karpathy).read_text())["images"] if im["split"] == a.split]
    n_refs = min((len(im["sentences"]) for im in images), default=0)
    if n_refs < 2:
        raise CapawareError(a.karpathy, f"split {a.split!r} has no image with two references or more",
                            "give a Karpathy json with several references per image")
    rows = []
    for k in range(n_refs):
        preds = {im["cocoid"]: im["sentences"][k]["raw"] for im in images}
        refs = {im["cocoid"]: [s["raw"] for j, s in enumerate(im["sentences"][:n_refs]) if j != k] for im in images}
        m = score_captions(preds, refs, meteor=False, spice=False).metrics
        rows.append((m["CIDEr-D"], m["BLEU-4"]))
        print(f"reference {k + 1} against the other {n_refs - 1}: CIDEr-D {m['CIDEr-D']:.3f}, BLEU-4 {m['BLEU-4']:.4f}")
    c, b = np.mean(rows, 0)
    print(f"mean over {len(images)} {a.split} images: CIDEr-D {c:.3f}, BLEU-4 {b:.4f}")


if __name__ == "__main__":
    run_cli(main)
