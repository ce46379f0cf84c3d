"""The embedded-default datasets: small synthetic stand-ins written in the real releases' file formats.

* ``generate_poses``    -> stick figures, simple pose JSON (stands in for MPII), ``poses.py``
* ``generate_rooms``    -> box rooms, LSUN room-layout release layout (stands in for LSUN type 5), ``rooms.py``
* ``generate_captions`` -> coloured shapes, Karpathy ``dataset_coco.json`` (stands in for COCO), ``shapes_captions.py``

Because they use the real formats, the same readers, label spaces and stages run on them and on the
real data. Every image draws from its own generator seeded by ``(seed, kind, index)``, so a run is
byte-identical for a seed and any image can be regenerated alone. Each file is written atomically and
the annotation file last, so a killed run never leaves a file that a reader would take as complete.

The helpers the three generators share are in ``drawing.py``.
"""
from capdata.synthetic.drawing import item_rng  # noqa: F401  (re-exported: benchmarks draw with it)
from capdata.synthetic.poses import generate_poses
from capdata.synthetic.rooms import generate_rooms
from capdata.synthetic.shapes_captions import generate_captions

__all__ = ["generate_poses", "generate_rooms", "generate_captions", "item_rng"]
