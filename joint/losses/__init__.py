"""The joint space's losses, named in ``joint.losses.registry``.

``vse0`` (every hinge of the batch), ``vse_pp`` (the hardest negative only: VSE++, the loss Liu et al. 2018 train
and reward with) and ``warmup`` (VSE0 for a first stretch of steps, then VSE++). The hinge arithmetic they share,
per pair and per item, is in ``hinges``. As stage one's losses, this package imports none of them itself: the
registry must stay torch-free for configs that check a loss name when they load.
"""
