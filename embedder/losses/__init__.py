"""Stage-one losses: pure functions of (embeddings, anchors, what the miner chose).

``log_ratio_loss`` (Eq. 5, the paper's loss), ``triplet_loss`` (Eq. 1 / 11, with a binary or dense
mask from ``embedder.mining``) and ``MarginLoss`` (Wu et al. 2017, the state-of-the-art baseline;
an ``nn.Module`` because its boundary beta is learned).
"""
from embedder.losses.distance import anchor_sq_dist
from embedder.losses.log_ratio import log_ratio_loss, log_ratio_loss_per_triplet
from embedder.losses.margin import MarginLoss
from embedder.losses.triplet import triplet_loss

__all__ = ["anchor_sq_dist", "log_ratio_loss", "log_ratio_loss_per_triplet", "MarginLoss", "triplet_loss"]
