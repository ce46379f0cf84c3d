"""Evaluation, the top layer below the command: caption metrics through pycocoevalcap (``score_captions``,
``captions_java``, ``caption_refs``, ``captions_discriminative``), grounding checks (``grounding``), linear
probes on pooled and grid features (``probe``, ``grid_probe``), feature scale (``feature_scale``), attention
maps, and the environment checks (``doctor``, ``preflight``); the tables and the HTML report live in
``eval.reporting``. It reads the files the stages write and may import any stage (``.importlinter``); no
stage imports it."""
