"""Evaluation, the top layer below the command: caption metrics (pycocoevalcap, ``captions``), grounding
checks (``grounding``), linear probes (``probe``), attention maps and the environment doctor; the tables
and the HTML report live in ``eval.reporting``. It reads the files the stages write and may import any
stage (``.importlinter``); no stage imports it."""
