"""capaware's front: the ``capaware`` command (cli.py, stage.py), the pipeline that runs its stages
(pipeline.sh, pipeline_plan.py) with what it checks first (preflight.py; doctor.py prints the same checks), the
cost planner (plan*.py), and captioners shared as one ``.capaware`` file (model_file.py, captioner.py, export*.py).

    from capaware import ImageCaptioner
    captions = ImageCaptioner.load("model.capaware").caption(["photo.jpg", pil_image])
"""
from __future__ import annotations


def __getattr__(name: str):
    # lazy, so that `capaware --help` answers without importing torch
    if name == "ImageCaptioner":
        from capaware.captioner import ImageCaptioner
        return ImageCaptioner
    raise AttributeError(name)


__all__ = ["ImageCaptioner"]
