"""capaware's front: the ``capaware`` command (cli.py) and captioners shared as one ``.capaware`` file.

    from capaware import Captioner
    captions = Captioner.load("model.capaware").caption(["photo.jpg", pil_image])
"""
from __future__ import annotations


def __getattr__(name: str):
    # lazy, so that `capaware --help` answers without importing torch
    if name == "Captioner":
        from capaware.captioner import Captioner
        return Captioner
    raise AttributeError(name)


__all__ = ["Captioner"]
