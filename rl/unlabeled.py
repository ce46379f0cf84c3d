"""Unlabeled images for self-retrieval SCST (Liu et al. 2018, §3.3): images without captions join each batch, and
their sampled captions learn from the retrieval reward alone (rl/rewards.py gives them no CIDEr-D term).

``retrieval.unlabeled`` is a features file of such images (stage two on ``images.folder``: the embedded default's
``unlabeled/`` folder, COCO's ``unlabeled2017``), read whole into memory; ``retrieval.unlabeled_ratio`` of them join
each batch per labeled image. Which ones:

- ``window: [0, 0]``: drawn uniformly, without repeats within a batch;
- ``window: [lo, hi]``: **moderately hard negatives**, as the paper mines them. For a labeled image of the batch,
  one of its reference captions (drawn at random) ranks the whole pool in the frozen joint space, and one image is
  drawn uniformly from ranks ``lo .. hi - 1`` of that ranking (0-based; clipped to the pool). Hard enough to make
  the labeled image's captions specific, not so hard that it is an image the caption equally describes (rank 0
  often is one, on templated data). The ranking is a dense cosine matrix and a stable ``torch.argsort``: pools of
  the embedded default's size (hundreds) and of COCO's ``unlabeled2017`` (123K x 1024 floats, a chunk of queries at
  a time) need no approximate nearest-neighbour index.

Every draw comes from one seeded ``torch.Generator``, saved in ``last.pt`` with the sampler, so a resumed run draws
what the unbroken one drew.
"""
from __future__ import annotations

import numpy as np
import torch

from capcore.errors import CapawareError
from captioners.data import CaptionDataset
from feature_extract.h5io import FeatsInfo
from rl.rewards import UNLABELED


def window_picks(queries: torch.Tensor, pool: torch.Tensor, lo: int, hi: int, generator: torch.Generator,
                 taken: set[int] | None = None) -> list[int]:
    """One pool row per query, drawn uniformly from ranks ``lo .. hi - 1`` of the pool by cosine to the query
    (l2-normalised rows; ties in row order), skipping rows already taken (``taken`` is updated). A window with every
    row taken falls back to the nearest untaken rank after it, then before it."""
    taken = set() if taken is None else taken
    order = torch.argsort(queries @ pool.t(), dim=1, descending=True, stable=True)
    hi = min(hi, pool.shape[0])
    lo = min(lo, hi - 1)
    picks = []
    for row in order.tolist():
        window = [row[r] for r in torch.randperm(hi - lo, generator=generator).add(lo).tolist()]
        rest = row[hi:] + row[:lo][::-1]
        pick = next((p for p in window + rest if p not in taken), None)
        if pick is None:
            raise ValueError("window_picks: more queries than pool images")
        taken.add(pick)
        picks.append(pick)
    return picks


class UnlabeledPool:
    """The unlabeled images (a features file read through the captioners' dataset, every valid row), and the draws
    of each batch."""

    def __init__(self, data: CaptionDataset, ratio: float, window: tuple[int, int], generator: torch.Generator,
                 embedded: torch.Tensor | None = None, joint=None):
        self.data, self.ratio, self.window = data, ratio, (int(window[0]), int(window[1]))
        self.generator, self.embedded, self.joint = generator, embedded, joint

    def __len__(self) -> int:
        return len(self.data)

    def count(self, labeled: int) -> int:
        return min(max(1, round(self.ratio * labeled)), len(self))

    @torch.no_grad()
    def draw(self, labeled: int, references: list[np.ndarray]) -> np.ndarray:
        """Rows of the pool for a batch of ``labeled`` images; ``references`` holds each one's captions (word id
        rows), read only for hard negatives."""
        n = self.count(labeled)
        if self.window == (0, 0):
            return torch.randperm(len(self), generator=self.generator)[:n].numpy()
        owners = [i % labeled for i in range(n)]  # the batch's images in turn, when there are more picks
        caps = [references[i][int(torch.randint(len(references[i]), (1,), generator=self.generator))] for i in owners]
        device = self.embedded.device
        queries = self.joint.embed_captions(torch.as_tensor(np.stack(caps), dtype=torch.long, device=device))
        return np.array(window_picks(queries, self.embedded, *self.window, self.generator))

    def features(self, rows: np.ndarray, device: torch.device) -> tuple[torch.Tensor, torch.Tensor]:
        got = self.data.read_rows(torch.as_tensor(rows, dtype=torch.long))
        return got["fc"].to(device).float(), got["att"].to(device).float()


def with_unlabeled(pool: UnlabeledPool | None, fc: torch.Tensor, att: torch.Tensor, label_ix: np.ndarray, labels,
                   device: torch.device) -> tuple[torch.Tensor, torch.Tensor, np.ndarray]:
    """The batch's features and label rows with the pool's draw after the labeled images (label row UNLABELED)."""
    if pool is None:
        return fc, att, label_ix
    rows = pool.draw(len(label_ix), [labels.captions_of(int(i)) for i in label_ix])
    fc_u, att_u = pool.features(rows, device)
    return (torch.cat([fc, fc_u]), torch.cat([att, att_u]),
            np.concatenate([label_ix, np.full(len(rows), UNLABELED, dtype=np.asarray(label_ix).dtype)]))


@torch.no_grad()
def load_pool(r, labeled: FeatsInfo, joint, device: torch.device, seed: int, chunk: int = 1024) -> UnlabeledPool | None:
    """``retrieval``'s pool (None without one), its features checked against the labeled file's shapes, and for
    hard negatives every pool image embedded once in the frozen joint space."""
    if not r.unlabeled:
        return None
    data = CaptionDataset(r.unlabeled, None, "all", in_memory=False)
    info = data.info
    if info.fc_dim != labeled.fc_dim or tuple(info.att_shape) != tuple(labeled.att_shape):
        raise CapawareError(r.unlabeled, f"unlabeled features of shape fc {info.fc_dim}, att {tuple(info.att_shape)}, "
                            f"but the labeled ones ({labeled.path}) are fc {labeled.fc_dim}, att "
                            f"{tuple(labeled.att_shape)}", "extract the unlabeled images with the same backbone "
                            "config as the labeled ones")
    if len(data) == 0:
        raise CapawareError(r.unlabeled, "no unlabeled images in this features file", "extract them with stage two")
    generator = torch.Generator().manual_seed(seed * 1_000_003 + 17)
    embedded = None
    if tuple(r.window) != (0, 0):
        source = joint.image.source
        parts = []
        for lo in range(0, len(data), chunk):
            got = data.read_rows(torch.arange(lo, min(lo + chunk, len(data))))
            parts.append(joint.embed_images(got[source].to(device).float()))
        embedded = torch.cat(parts)
    return UnlabeledPool(data, float(r.unlabeled_ratio), tuple(r.window), generator, embedded, joint)
