"""Tables and the report, in one place: Table 1 (``results_table``) and its seed tables
(``results_seeds``), stage one's seed tables (``retrieval_seeds``), what SCST did to each captioner
(``scst_gains``) and the SCST recipes over seeds (``scst_recipes``), the numbers over seeds they share
(``seed_stats``), and the static HTML report (``report``, with ``inputs``, ``figures``, ``captions``,
``html`` and its DOM ``check``). The metrics themselves are computed one level up, in ``eval``."""
