"""VSE0 for the first ``warmup_steps`` training steps, then VSE++.

Users of vsepp report that "the VSE loss stalls": from random encoders the hardest negative of a batch is mostly
noise, and its single hinge per item gives a weak, erratic gradient. vse_infty's answer is a warm-up on the summed
loss (its ``vse_mean_warmup_epochs``, ``max_violation_off`` then ``max_violation_on``); this is it, counted in steps.
The count is a buffer, so it is in the module's ``state_dict`` and a resumed run switches at the same step as an
unbroken one. A step is a call in training mode; in eval mode the loss neither counts nor changes which it is.
"""
from __future__ import annotations

import torch

from joint.losses.vse import VSELoss


class WarmupVSE(VSELoss):
    def __init__(self, margin: float = 0.2, warmup_steps: int = 1000):
        super().__init__(margin, hardest=False)
        if warmup_steps < 0:
            raise ValueError(f"warmup_steps must be >= 0, got {warmup_steps}")
        self.warmup_steps = int(warmup_steps)
        self.register_buffer("steps", torch.zeros((), dtype=torch.long))

    def uses_hardest(self) -> bool:
        return int(self.steps) >= self.warmup_steps

    def forward(self, img: torch.Tensor, txt: torch.Tensor) -> torch.Tensor:
        loss = super().forward(img, txt)
        if self.training:
            self.steps += 1
        return loss
