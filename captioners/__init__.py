"""Stage three: captioners on stage-two features (Kim et al. 2019, appendix A.4).

``prepro`` (vocab.json + labels.h5 from a Karpathy json) -> ``data`` (feats.h5 joined to labels by
image id) -> ``model`` (embeddings + a core from ``cores``: Att2all2, Top-Down or the ``transformer_core``,
+ logit) -> ``xe`` (XE through ``loop``, best val CIDEr-D by ``validation``) -> decoding (greedy /
sampling / beam, written once in ``decoding``); ``predict`` captions a features file, ``card`` is what a
checkpoint says about itself, ``speed`` the optional torch.compile.
"""
