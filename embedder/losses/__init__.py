"""Stage-one losses, one file each, named in ``embedder.losses.registry``.

``log_ratio`` (Eq. 5, the paper's loss), ``triplet`` (Eq. 1 / 11, with a binary or dense mask from
``embedder.mining``), ``margin`` (Wu et al. 2017, the state-of-the-art baseline; its boundary beta is
learned) and, after the paper, ``rank_n_contrast`` (Zha et al. 2023). ``base`` says what a loss is.

This package imports none of them itself: the registry, which configs read when they load, must not
pull in torch.
"""
