"""Stage two: dump attention (``att``) and pooled (``fc``) features of any backbone to HDF5.

``python -m feature_extract --config configs/demo/demo_features_img.yaml [key=value ...]`` writes the
``feats.h5`` of docs/design.md, streaming and resumable; ``python -m feature_extract.verify FILE`` checks
one; ``feature_extract.h5io.open_features`` is how stage three reads one (and labels it Img / Cap).
"""
