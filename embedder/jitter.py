"""Scale and location jitter of a stage-one batch, as Kim et al. train (§4.2), without their flips.

Each image is replaced by a random square crop of side 1/s of the image (s uniform in [1, 1 + ``amount``]),
at a random place, resized back to the input size (bilinear, ``grid_sample``): a zoom in and a shift, so
no pixel outside the image is invented. No flips: the captions say "left" and "right", and a flipped image
would keep a label that no longer describes it.

The draws come from a generator seeded by (seed, step), not from a stream carried across steps, so a run
resumed after a kill jitters its remaining steps exactly as an uninterrupted run does, with no state in the
checkpoint.
"""
from __future__ import annotations

import torch
import torch.nn.functional as F


def step_generator(seed: int, step: int) -> torch.Generator:
    return torch.Generator().manual_seed((int(seed) * 1_000_003 + int(step)) % (2 ** 63))


def jitter(x: torch.Tensor, amount: float, seed: int, step: int) -> torch.Tensor:
    """``x`` [B, 3, H, W] (normalised) under one random zoom-and-shift per image; ``amount`` 0 returns it."""
    if amount <= 0:
        return x
    g = step_generator(seed, step)
    b = x.shape[0]
    side = 1.0 / (1.0 + amount * torch.rand(b, generator=g))  # crop side, as a fraction of the image
    centre = (1.0 - side)[:, None] * (2 * torch.rand(b, 2, generator=g) - 1)  # keeps the crop inside
    theta = torch.zeros(b, 2, 3)
    theta[:, 0, 0] = theta[:, 1, 1] = side
    theta[:, :, 2] = centre
    grid = F.affine_grid(theta.to(x.device, torch.float32), list(x.shape), align_corners=False)
    out = F.grid_sample(x.float(), grid, mode="bilinear", padding_mode="border", align_corners=False)
    return out.to(x.dtype).contiguous(memory_format=torch.channels_last)
