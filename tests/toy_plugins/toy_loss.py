"""A toy stage-one loss: embedding distances regressed onto label distances to a ``power``, both over
their batch means (scale-free, so any lr and label unit trains).

Not a method of the paper: it exists to show that a loss is one file on ``RowLoss`` plus one
``register_loss`` line. ``calls`` counts its batches, so a test can see that stage one used it.
"""
import torch

from embedder.losses.base import LossBatch, RowLoss


class DistanceRegressionLoss(RowLoss):
    calls = 0

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.power = float(args["power"])

    def forward(self, batch: LossBatch) -> torch.Tensor:
        type(self).calls += 1
        diff = batch.emb[batch.anchors.to(batch.emb.device)][:, None] - batch.emb[None]  # [A, B, D]
        dist = (diff.pow(2).sum(-1) + 1e-12).sqrt()  # eps: the anchor's distance to itself has a gradient
        target = batch.label_dist.to(dist.device) ** self.power
        return ((dist / dist.mean() - target / target.mean().clamp_min(1e-12)) ** 2).mean()
