"""Label distances against slow, obvious per-pair computations."""
import numpy as np

from capdata.records import PoseRecords
from embedder.labels.layout import layout_distance, one_hot
from embedder.labels.pose import joints_in_frame, pose_distance


def test_pose_distance_matches_per_pair_loop():
    rng = np.random.default_rng(0)
    ja, jb = rng.uniform(0, 64, (4, 16, 2)), rng.uniform(0, 64, (5, 16, 2))
    va, vb = rng.random((4, 16)) > 0.2, rng.random((5, 16)) > 0.2
    got = pose_distance(ja, va, jb, vb)
    for a in range(4):
        for b in range(5):
            want = sum(np.hypot(*(ja[a, j] - jb[b, j])) for j in range(16) if va[a, j] and vb[b, j])
            assert abs(got[a, b] - want) < 1e-3


def test_pose_distance_is_zero_on_itself_and_ignores_invisible_joints():
    j = np.random.default_rng(1).uniform(0, 64, (1, 16, 2))
    v = np.ones((1, 16), bool)
    moved = j.copy()
    moved[0, 3, 0] += 10.0
    v_hidden = v.copy()
    v_hidden[0, 3] = False
    assert pose_distance(j, v, j, v)[0, 0] == 0
    assert abs(pose_distance(j, v, moved, v)[0, 0] - 10.0) < 1e-5
    assert pose_distance(j, v, moved, v_hidden)[0, 0] == 0


def test_joints_are_measured_in_the_input_frame():
    joints = np.zeros((1, 16, 2), np.float32)
    joints[0, :, 0], joints[0, :, 1] = 150.0, 250.0
    rec = PoseRecords([None], np.array(["train"]), joints, np.ones((1, 16), bool),
                      np.array([[100, 200, 300, 400]], np.float32))
    frame = joints_in_frame(rec, 64)
    assert np.allclose(frame[0, 0], [(150 - 100) * 64 / 200, (250 - 200) * 64 / 200])


def miou_reference(a, b):
    ious = []
    for c in range(5):
        inter = np.logical_and(a == c, b == c).sum()
        union = np.logical_or(a == c, b == c).sum()
        if union:
            ious.append(inter / union)
    return np.mean(ious)


def test_layout_distance_matches_reference_miou():
    rng = np.random.default_rng(2)
    maps = rng.integers(0, 5, (6, 12, 12)).astype(np.uint8)
    maps[0][maps[0] == 4] = 0  # a surface absent from one map
    maps[1][maps[1] >= 3] = 1
    got = layout_distance(one_hot(maps), one_hot(maps))
    for a in range(6):
        for b in range(6):
            assert abs(got[a, b] - (1 - miou_reference(maps[a], maps[b]))) < 1e-6
    assert np.allclose(np.diag(got), 0)
