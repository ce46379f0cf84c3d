"""Stage three, reinforcement: self-critical sequence training (SCST) with a CIDEr-D reward.

``rl.cider`` (the reward: pycocoevalcap's CIDEr-D on token ids with training-set document
frequencies, vectorised), ``rl.scst_loss`` (sampling with gradients, baselines, loss), ``rl.scst`` (the
loop: ``python -m rl.scst --config configs/demo/demo_att2all2_scst.yaml``), ``rl.config``.
"""
