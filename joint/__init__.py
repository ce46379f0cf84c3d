"""The joint image–text space (issue #66): a caption and an image embedded in one space, where their cosine
similarity says how well the caption describes the image.

Liu et al. 2018 ("Show, Tell and Discriminate") score each generated caption by how well it retrieves its own image
among the others of its batch; Faghri et al.'s VSE++ (fartashf/vsepp) is the space they score it in. The same text
side serves stage one (Gordo & Larlus's joint embedding) and the referring-expression track later, so the package
sits below stage one (``embedder``) and above the data layer in ``.importlinter``: it knows token ids and sizes,
never the captioners' package. One job per file:

- ``text_encoder``: a GRU over the captioners' own word ids (``labels.h5``), so a sampled caption needs no
  translation;
- ``image_encoder``: a projection of stage two's features (``fc``, or the ``att`` grid pooled);
- ``model``: ``JointSpace``, both encoders and their similarity matrix;
- ``losses/``: VSE0, VSE++ and the warm-up from one to the other, named in ``losses/registry.py``;
- ``recall``: i2t and t2i R@K, medr, meanr and rsum, full set and 1K folds;
- the pipeline's ``joint`` stage: ``config`` (its schema), ``data`` (feats.h5 and XE's labels.h5, read with h5py),
  ``train`` (the loop, best-on-val, resume, the test table) and ``card`` (what a checkpoint was trained on, and
  ``check_fits``, the one-line refusal of another vocabulary or feature width).
"""
