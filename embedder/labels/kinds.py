"""The kinds-present label space (issue #46, Img-adapted): an image's class label as the Img stand-in knows
classes, the set of kinds (coloured shapes) in the scene; the distance between two images is the number of
kinds one has and the other lacks.

Img-adapted trains a row exactly as Cap does (same loss, mining, steps, learning rate, jitter, images) on
these labels instead of the captions, so that Img is no longer the only feature set that never saw whole
128-px images. The kinds come from the dataset's per-image attributes (``object``: the embedded default's
Karpathy json carries them); a dataset without them is refused in one line.
"""
from __future__ import annotations

import numpy as np

from capcore.errors import CapawareError


class KindsSpace:
    name = "kinds"

    def __init__(self, records):
        attributes = getattr(records, "attributes", None)
        if attributes is None or any("object" not in a for a in attributes):
            raise CapawareError("method.labels", "kinds needs each image's object kinds (the 'attributes' -> 'object' "
                                "field of the embedded default's Karpathy json)",
                                "use labels: real or shuffled on this data")
        vocab = sorted({k for a in attributes for k in a["object"]})
        column = {k: j for j, k in enumerate(vocab)}
        self.vocab = vocab
        self.onehot = np.zeros((len(attributes), len(vocab)), dtype=np.float32)
        for i, a in enumerate(attributes):
            self.onehot[i, [column[k] for k in a["object"]]] = 1.0

    def __len__(self) -> int:
        return len(self.onehot)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        a, b = self.onehot[np.asarray(rows)], self.onehot[np.asarray(cols)]
        # |A xor B| = |A| + |B| - 2 |A and B|
        return (a.sum(1)[:, None] + b.sum(1)[None, :] - 2.0 * a @ b.T).astype(np.float32)

    def params(self) -> dict:
        return {"kinds": len(self.vocab)}
