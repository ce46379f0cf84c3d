"""capaware's foundation: what every stage shares and nothing of a stage.

Errors with their one-line CLI (``errors``), atomic writes (``atomic``), the device and precision keys
(``device``), checkpoints (``checkpoint``), torchrun helpers (``distributed``), Adam (``optim``) and
typed config loading (``config``). It imports no other capaware package (``.importlinter``).
"""
