"""Stage three: captioners on stage-two features (Kim et al. 2019, appendix A.4).

``prepro`` (vocab.json + labels.h5 from a Karpathy json) -> ``data`` (feats.h5 joined to labels by
image id) -> ``model`` (embeddings + a core from ``cores``: Att2all2 or Top-Down + logit) -> ``train``
(XE, best val CIDEr-D) -> ``decode`` (greedy / sampling / beam, written once in ``decoding``).
"""
