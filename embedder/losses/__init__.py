"""Stage-one losses: pure functions of (embeddings, anchors, what the miner chose).

``log_ratio_loss`` (Eq. 5, the paper's loss), ``triplet_loss`` (Eq. 1 / 11, with a binary or dense
mask from ``embedder.mining``), ``MarginLoss`` (Wu et al. 2017, the state-of-the-art baseline;
an ``nn.Module`` because its boundary beta is learned) and, after the paper, ``rank_n_contrast_loss``
(Zha et al. 2023).
"""
from embedder.losses.distance import anchor_sq_dist
from embedder.losses.log_ratio import log_ratio_loss, log_ratio_loss_per_triplet
from embedder.losses.margin import MarginLoss
from embedder.losses.rank_n_contrast import rank_n_contrast_loss
from embedder.losses.triplet import triplet_loss

__all__ = ["anchor_sq_dist", "log_ratio_loss", "log_ratio_loss_per_triplet", "MarginLoss", "rank_n_contrast_loss",
           "triplet_loss"]
