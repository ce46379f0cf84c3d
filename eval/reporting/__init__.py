"""Tables and the report: Table 1 (``results_table``) and its seed tables (``results_seeds``), Table 1 over
stage-one trunks under the study's declaration (``trunk_table``, with ``trunk_stats`` and ``declaration``),
stage one's seed tables (``retrieval_seeds``), what SCST did to each captioner (``scst_gains``) and the SCST
recipes over seeds (``scst_recipes``), the numbers over seeds they share (``seed_stats``), and the static HTML
report (``report``, with ``inputs``, ``figures``, ``caption_sections``, ``html`` and its DOM ``check``). The
metrics themselves are computed one level up, in ``eval``."""
