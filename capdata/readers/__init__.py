"""Readers of the real dataset releases; each returns one of ``capdata.records``' dataclasses.

Label spaces, samplers and datasets see only records, never a file format, so a new dataset needs a
reader and nothing else. Readers validate annotations (one-line CapawareError naming the file and
entry) but never decode images (pose_json reads an image's header only when its entry gives no size);
see ``capdata.images`` for that.
"""
from capdata.images import check_images_exist, load_rgb
from capdata.readers.karpathy import KARPATHY_SPLITS, read_karpathy
from capdata.readers.lsun import (
    LSUN_SURFACES,
    LSUN_TO_OURS,
    load_layout_map,
    read_lsun,
    record_layout_map,
)
from capdata.readers.mpii import read_mpii
from capdata.readers.mpii_json import read_mpii_json
from capdata.readers.pose_json import read_pose_json

__all__ = [
    "read_karpathy", "read_pose_json", "read_mpii", "read_mpii_json", "read_lsun", "load_layout_map",
    "record_layout_map",
    "check_images_exist", "load_rgb", "KARPATHY_SPLITS", "LSUN_SURFACES", "LSUN_TO_OURS",
]
