"""Evaluation, the top layer below the command: caption metrics through pycocoevalcap (``score_captions``,
``captions_java``, ``caption_refs``, ``captions_discriminative``), grounding checks (``grounding``) and attention
maps; the tables and the HTML report live in ``eval.reporting``. It reads the files the stages write and may import
any stage (``.importlinter``); no stage imports it. What a machine and a pipeline need (the doctor, the preflight)
belongs to the command, in capaware/; study-only tables, in studies/."""
