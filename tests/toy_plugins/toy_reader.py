"""A toy pose format: one CSV line per image, ``file,split,width,height,x0,y0,...,x15,y15``.

Every joint is visible, and the crop is the whole image made square (as the pose JSON's default).
It exists to show that a dataset is one reader file plus one ``register_format`` line.
"""
import csv

import numpy as np

from capdata.formats import Source
from capdata.readers.pose_json import default_box
from capdata.records import PoseRecords


def read_pose_csv(source: Source) -> PoseRecords:
    with open(source.annotation, newline="") as f:
        rows = list(csv.reader(f))
    joints = np.array([[float(v) for v in row[4:]] for row in rows], dtype=np.float32).reshape(len(rows), 16, 2)
    return PoseRecords(image_paths=[(source.annotation.parent / row[0]).resolve() for row in rows],
                       splits=np.array([row[1] for row in rows]), joints=joints,
                       visible=np.ones((len(rows), 16), dtype=bool),
                       boxes=np.array([default_box(float(r[2]), float(r[3])) for r in rows], dtype=np.float32))
