"""capaware's data layer: the records every stage consumes and where they come from.

``records`` (the in-memory dataclasses), ``readers`` (the public releases' own files: Karpathy json,
MPII .mat and JSON, LSUN, capaware's pose JSON), ``synthetic`` (the embedded default, written in
those same formats), ``images`` (decoding) and ``check_data`` (the data stage's file checks). It
imports only ``capcore`` (``.importlinter``). File formats: docs/data_formats/.
"""
