"""Pose label space: D(y_a, y_b) = sum over joints visible in both of the Euclidean joint distance.

Distances are measured in pixels of the network's input frame (docs/design.md), so a pose label does not
depend on the resolution of the photograph it came from: joints are mapped through the crop box.
"""
from __future__ import annotations

import numpy as np

from capdata.records import PoseRecords


def joints_in_frame(records: PoseRecords, input_size: int) -> np.ndarray:
    """[N, 16, 2] joint coordinates in the ``input_size`` x ``input_size`` crop the network sees."""
    boxes = records.boxes.astype(np.float32)
    side = (boxes[:, 2] - boxes[:, 0])[:, None, None]
    return ((records.joints - boxes[:, None, :2]) * (input_size / side)).astype(np.float32)


def pose_distance(joints_a: np.ndarray, visible_a: np.ndarray,
                  joints_b: np.ndarray, visible_b: np.ndarray) -> np.ndarray:
    """[A, B] sum of joint distances over joints visible in both poses (batched, float32)."""
    diff = joints_a[:, None, :, :] - joints_b[None, :, :, :]  # [A, B, 16, 2]
    dist = np.sqrt((diff * diff).sum(-1))  # [A, B, 16]
    both = visible_a[:, None, :] & visible_b[None, :, :]
    return (dist * both).sum(-1).astype(np.float32)


class PoseSpace:
    name = "pose"

    def __init__(self, records: PoseRecords, input_size: int):
        self.joints = joints_in_frame(records, input_size)
        self.visible = records.visible.astype(bool)
        self.input_size = input_size

    def __len__(self) -> int:
        return len(self.joints)

    def pairwise(self, rows: np.ndarray, cols: np.ndarray) -> np.ndarray:
        return pose_distance(self.joints[rows], self.visible[rows], self.joints[cols], self.visible[cols])

    def params(self) -> dict:
        return {"distance": "sum of joint L2 over joints visible in both", "input_size": self.input_size}
