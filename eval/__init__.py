"""Evaluation and reporting, the top layer: caption metrics (pycocoevalcap), captioning results tables
over seeds, stage-one tables over seeds, grounding checks and the HTML report. It reads the files the
stages write and may import any stage (``.importlinter``); no stage imports it."""
