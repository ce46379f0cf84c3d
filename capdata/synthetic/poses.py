"""Stick-figure poses: the embedded stand-in for MPII Human Pose.

Each figure is a 3-D kinematic tree over the 16 MPII joints (pelvis root; hips, knees, ankles; thorax,
upper neck, head top; shoulders, elbows, wrists), posed by continuous joint angles inside anatomical
limits, turned by a body yaw, projected orthographically and drawn. The angles are a random convex
blend of a few activity prototypes (stand, walk, run, sit, squat, bend, reach, ...) plus Gaussian
noise, so poses fill a continuum and the joint-distance label is graded rather than clustered.
Placement varies only mildly (centre within ~8% of the frame, scale 0.85-1.1) so that articulation,
not position, dominates the label. Left limbs are drawn lighter than right limbs in every image:
without that cue a figure seen from the back would be indistinguishable from its mirror image.

Written files (the simple pose JSON of docs/design.md, read by ``capdata.readers.pose_json``)::

    DIR/poses.json  {"joint_names": MPII_JOINTS,
                     "images": [{"file": "images/000000.png", "split": "train"|"test",
                                 "width": W, "height": H,
                                 "joints": [[x, y] x 16],   # MPII id order, pixels, 2 decimals
                                 "visible": [0|1 x 16]}]}   # 0: outside the frame or under an occluder
    DIR/images/NNNNNN.png  RGB, size x size

Pixel convention: (0, 0) is the centre of the top-left pixel; a joint is in the frame when
0 <= x, y <= size - 1.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from tqdm import tqdm

from capdata.records import MPII_JOINTS
from capdata.synthetic.drawing import (
    SUPERSAMPLE,
    check_args,
    downsample,
    gradient,
    item_rng,
    random_colour,
    save_image,
    to_uint8,
    value_noise,
    write_json,
)

J = {name: i for i, name in enumerate(MPII_JOINTS)}

PARAMS = ("torso_flex", "torso_side", "neck_flex",
          "l_sh_flex", "l_sh_abd", "l_elbow", "r_sh_flex", "r_sh_abd", "r_elbow",
          "l_hip_flex", "l_hip_abd", "l_knee", "r_hip_flex", "r_hip_abd", "r_knee")
"""Joint angles in degrees. Flexion turns a limb forward from hanging down, abduction sideways out."""
P = {name: i for i, name in enumerate(PARAMS)}

LIMITS = {"torso_flex": (-20, 95), "torso_side": (-30, 30), "neck_flex": (-35, 45),
          "sh_flex": (-60, 185), "sh_abd": (-10, 170), "elbow": (0, 150),
          "hip_flex": (-35, 125), "hip_abd": (-10, 55), "knee": (0, 150)}
NOISE_DEG = {"torso_flex": 8, "torso_side": 6, "neck_flex": 10, "sh_flex": 20, "sh_abd": 15,
             "elbow": 20, "hip_flex": 14, "hip_abd": 8, "knee": 15}


def _generic(name: str) -> str:
    return name[2:] if name[:2] in ("l_", "r_") else name


def _proto(**angles: float) -> np.ndarray:
    """A prototype from keyword angles; ``sh_flex=..`` sets both sides, ``l_sh_flex=..`` one side."""
    vec = np.zeros(len(PARAMS))
    vec[P["l_sh_abd"]] = vec[P["r_sh_abd"]] = 8
    vec[P["l_elbow"]] = vec[P["r_elbow"]] = 10
    vec[P["l_hip_abd"]] = vec[P["r_hip_abd"]] = 5
    vec[P["l_knee"]] = vec[P["r_knee"]] = 3
    for key, value in angles.items():
        names = [key] if key in P else [f"l_{key}", f"r_{key}"]
        for name in names:
            vec[P[name]] = value
    return vec


PROTOTYPES = {
    "stand": _proto(),
    "walk": _proto(torso_flex=5, l_sh_flex=-25, r_sh_flex=25, elbow=20, l_hip_flex=25, r_hip_flex=-15,
                   l_knee=10, r_knee=35),
    "run": _proto(torso_flex=20, l_sh_flex=-50, r_sh_flex=60, elbow=95, l_hip_flex=60, r_hip_flex=-25,
                  l_knee=45, r_knee=105),
    "sit": _proto(torso_flex=10, sh_flex=20, elbow=60, hip_flex=90, hip_abd=10, knee=90),
    "squat": _proto(torso_flex=45, sh_flex=60, elbow=20, hip_flex=120, hip_abd=20, knee=140),
    "arms_up": _proto(sh_flex=170, sh_abd=20, elbow=10),
    "star_jump": _proto(sh_abd=120, elbow=5, hip_abd=35),
    "reach": _proto(torso_flex=10, r_sh_flex=95, r_elbow=5, l_sh_flex=10),
    "bend": _proto(torso_flex=85, sh_flex=80, elbow=10, knee=5),
    "kick": _proto(torso_flex=-10, sh_abd=40, l_hip_flex=100, l_knee=20, r_hip_flex=-5, r_knee=10),
    "throw": _proto(r_sh_flex=160, r_elbow=100, l_sh_flex=70, l_elbow=20, torso_side=-10,
                    l_hip_flex=20, l_knee=25),
}
_PROTO_MATRIX = np.stack(list(PROTOTYPES.values()))
_LOW = np.array([LIMITS[_generic(n)][0] for n in PARAMS], dtype=float)
_HIGH = np.array([LIMITS[_generic(n)][1] for n in PARAMS], dtype=float)
_SIGMA = np.array([NOISE_DEG[_generic(n)] for n in PARAMS], dtype=float)
_MIRROR = np.array([P[("r_" + n[2:]) if n.startswith("l_") else ("l_" + n[2:]) if n.startswith("r_") else n]
                    for n in PARAMS])

BONE_LENGTHS = {"torso": 1.0, "neck": 0.22, "head": 0.38, "hip": 0.18, "shoulder": 0.34,
                "thigh": 0.9, "shin": 0.85, "upper_arm": 0.6, "forearm": 0.55}
"""Segment lengths in torso units (pelvis to thorax = 1); each person gets them times U(0.93, 1.07)."""
LENGTH_JITTER = (0.93, 1.07)
SCALE_RANGE = (0.85, 1.1)
UNIT_FRACTION = 0.78 / 3.35
"""Torso unit in frame widths at scale 1: a standing figure (3.35 units tall) fills 78% of the frame."""
CENTRE_JITTER = 0.08
OCCLUDER_RATE = 0.10

BONES = (  # (joint a, joint b, length name): every segment whose 3-D length is fixed per person
    ("r_ankle", "r_knee", "shin"), ("r_knee", "r_hip", "thigh"), ("l_hip", "l_knee", "thigh"),
    ("l_knee", "l_ankle", "shin"), ("r_wrist", "r_elbow", "forearm"), ("r_elbow", "r_shoulder", "upper_arm"),
    ("l_shoulder", "l_elbow", "upper_arm"), ("l_elbow", "l_wrist", "forearm"),
    ("pelvis", "thorax", "torso"), ("thorax", "upper_neck", "neck"), ("upper_neck", "head_top", "head"),
    ("r_hip", "pelvis", "hip"), ("pelvis", "l_hip", "hip"),
)
_DRAWN = (  # limb segments drawn as thick lines, with their side (for the left/right tint)
    ("r_ankle", "r_knee", "r"), ("r_knee", "r_hip", "r"), ("l_hip", "l_knee", "l"), ("l_knee", "l_ankle", "l"),
    ("r_wrist", "r_elbow", "r"), ("r_elbow", "r_shoulder", "r"), ("l_shoulder", "l_elbow", "l"),
    ("l_elbow", "l_wrist", "l"), ("thorax", "upper_neck", "c"),
)


def sample_angles(rng: np.random.Generator) -> np.ndarray:
    """Joint angles (degrees, [len(PARAMS)]): a Dirichlet blend of prototypes plus noise, clipped."""
    weights = rng.dirichlet(np.full(len(PROTOTYPES), 0.35))
    angles = weights @ _PROTO_MATRIX + rng.normal(0.0, 1.0, len(PARAMS)) * _SIGMA
    if rng.random() < 0.5:  # asymmetric prototypes (walk, reach, kick) appear with either side leading
        angles = angles[_MIRROR]
        angles[P["torso_side"]] *= -1
    return np.clip(angles, _LOW, _HIGH)


def _rot_x(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[1, 0, 0], [0, c, -s], [0, s, c]])


def _rot_z(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, -s, 0], [s, c, 0], [0, 0, 1]])


def _rot_y(a: float) -> np.ndarray:
    c, s = np.cos(a), np.sin(a)
    return np.array([[c, 0, s], [0, 1, 0], [-s, 0, c]])


def _limb(flex: float, abd: float, bend: float, side: float) -> tuple[np.ndarray, np.ndarray]:
    """Unit directions of the proximal and distal segment (body frame: x = subject's left, y up, z forward).

    The distal segment turns by ``bend`` inside the plane of the proximal direction and its flexion
    tangent, so an elbow or knee bends sensibly whatever the shoulder or hip is doing.
    """
    f, a, b = np.radians([flex, abd, bend])
    upper = np.array([side * np.sin(a), -np.cos(a) * np.cos(f), np.cos(a) * np.sin(f)])
    tangent = np.array([0.0, np.sin(f), np.cos(f)])  # d(upper)/d(flex), orthogonal to upper
    lower = np.cos(b) * upper + np.sin(b) * tangent
    return upper, lower


def skeleton_3d(angles: np.ndarray, lengths: dict[str, float]) -> np.ndarray:
    """[16, 3] joint positions in torso units, body frame, pelvis at the origin."""
    a = {name: angles[i] for i, name in enumerate(PARAMS)}
    out = np.zeros((len(MPII_JOINTS), 3))
    torso = _rot_z(np.radians(a["torso_side"])) @ _rot_x(np.radians(a["torso_flex"]))
    up = np.array([0.0, 1.0, 0.0])
    out[J["thorax"]] = lengths["torso"] * (torso @ up)
    neck_dir = torso @ _rot_x(np.radians(a["neck_flex"])) @ up
    out[J["upper_neck"]] = out[J["thorax"]] + lengths["neck"] * neck_dir
    out[J["head_top"]] = out[J["upper_neck"]] + lengths["head"] * neck_dir
    for s, side in (("l", 1.0), ("r", -1.0)):
        # shoulders sit slightly below the thorax joint, lengths["shoulder"] away from it
        offset = np.array([side, -0.25, 0.0])
        offset *= lengths["shoulder"] / np.linalg.norm(offset)
        shoulder = out[J["thorax"]] + torso @ offset
        upper, lower = _limb(a[f"{s}_sh_flex"], a[f"{s}_sh_abd"], a[f"{s}_elbow"], side)
        out[J[f"{s}_shoulder"]] = shoulder
        out[J[f"{s}_elbow"]] = shoulder + lengths["upper_arm"] * (torso @ upper)
        out[J[f"{s}_wrist"]] = out[J[f"{s}_elbow"]] + lengths["forearm"] * (torso @ lower)
        hip = np.array([side * lengths["hip"], 0.0, 0.0])
        upper, lower = _limb(a[f"{s}_hip_flex"], a[f"{s}_hip_abd"], -a[f"{s}_knee"], side)
        out[J[f"{s}_hip"]] = hip
        out[J[f"{s}_knee"]] = hip + lengths["thigh"] * upper
        out[J[f"{s}_ankle"]] = out[J[f"{s}_knee"]] + lengths["shin"] * lower
    return out


def sample_pose(rng: np.random.Generator, size: int) -> dict:
    """One figure: angles, per-person lengths, pixel scale, 3-D joints (px) and their 2-D projection.

    ``joints_3d`` is in pixels in the camera frame (x right, y down, z towards the camera) before the
    in-plane roll and the translation; ``joints`` [16, 2] are the image coordinates.
    """
    angles = sample_angles(rng)
    jitter = rng.uniform(*LENGTH_JITTER, size=len(BONE_LENGTHS))
    lengths = {name: base * j for (name, base), j in zip(BONE_LENGTHS.items(), jitter)}
    unit = rng.uniform(*SCALE_RANGE) * UNIT_FRACTION * size
    yaw = np.radians(rng.uniform(-100, 100))
    roll = np.radians(float(np.clip(rng.normal(0, 6), -15, 15)))
    body = skeleton_3d(angles, lengths) @ _rot_y(yaw).T
    cam = np.stack([body[:, 0], -body[:, 1], body[:, 2]], axis=1) * unit
    c, s = np.cos(roll), np.sin(roll)
    flat = cam[:, :2] @ np.array([[c, s], [-s, c]])
    head_r = 0.5 * np.linalg.norm(flat[J["head_top"]] - flat[J["upper_neck"]]) + 0.05 * unit
    lo, hi = flat.min(axis=0) - head_r * 0.5, flat.max(axis=0) + head_r * 0.5
    target = (size - 1) / 2 + rng.uniform(-CENTRE_JITTER, CENTRE_JITTER, 2) * size
    joints = flat + (target - (lo + hi) / 2)
    return {"angles": angles, "lengths": lengths, "unit": unit, "roll": roll,
            "joints_3d": cam, "joints": joints, "depth": cam[:, 2]}


def _background(rng: np.random.Generator, px: int) -> Image.Image:
    """Gradient + noise texture, then random lines and blobs blended in: clutter that is not a figure."""
    c0, c1 = np.array(random_colour(rng)), np.array(random_colour(rng))
    ramp = gradient(rng, px, px)[..., None]
    noise = value_noise(rng, px, px, int(rng.integers(4, 16)))[..., None] - 0.5
    base = c0 + (c1 - c0) * ramp + noise * rng.uniform(0, 90) * rng.uniform(0.6, 1.0, 3)
    bg = Image.fromarray(to_uint8(base))
    clutter = bg.copy()
    draw = ImageDraw.Draw(clutter)
    for _ in range(int(rng.integers(1, 6))):
        p = rng.uniform(-0.1, 1.1, 4) * px
        draw.line(p.tolist(), fill=random_colour(rng), width=max(1, int(rng.uniform(0.01, 0.03) * px)))
    for _ in range(int(rng.integers(1, 5))):
        cx, cy = rng.uniform(0, px, 2)
        rx, ry = rng.uniform(0.04, 0.22, 2) * px
        draw.ellipse([cx - rx, cy - ry, cx + rx, cy + ry], fill=random_colour(rng))
    return Image.blend(bg, clutter, float(rng.uniform(0.35, 0.8)))


def _tint(colour: np.ndarray, side: str) -> tuple[int, int, int]:
    if side == "l":
        colour = 0.55 * colour + 0.45 * 255
    elif side == "r":
        colour = 0.6 * colour
    return tuple(int(v) for v in np.clip(np.rint(colour), 0, 255))


def _draw_figure(img: Image.Image, rng: np.random.Generator, pose: dict, ss: int) -> None:
    """Limbs as thick round-capped lines, torso as a filled quad, head as a disc; far parts first."""
    draw = ImageDraw.Draw(img)
    pts = (pose["joints"] + 0.5) * ss - 0.5
    depth = pose["depth"]
    limb_colour = np.array(random_colour(rng, 40, 216), dtype=float)
    torso_colour = random_colour(rng, 20, 236)
    head_colour = random_colour(rng, 60, 256)
    width = max(1.5, rng.uniform(0.08, 0.14) * pose["unit"]) * ss
    items = []
    for a, b, side in _DRAWN:
        ia, ib = J[a], J[b]
        items.append(((depth[ia] + depth[ib]) / 2, "line", (pts[ia], pts[ib]), _tint(limb_colour, side), width))
    quad = [J["l_shoulder"], J["r_shoulder"], J["r_hip"], J["l_hip"]]
    items.append((depth[quad].mean(), "quad", pts[quad], torso_colour, width))
    neck, top = pts[J["upper_neck"]], pts[J["head_top"]]
    centre, radius = (neck + top) / 2, 0.5 * np.linalg.norm(top - neck) + 0.05 * pose["unit"] * ss
    items.append(((depth[J["upper_neck"]] + depth[J["head_top"]]) / 2, "disc", (centre, radius), head_colour, 0))
    for _, kind, geom, colour, w in sorted(items, key=lambda item: item[0]):
        if kind == "line":
            (x0, y0), (x1, y1) = geom
            draw.line([x0, y0, x1, y1], fill=colour, width=int(round(w)))
            r = w / 2
            for x, y in ((x0, y0), (x1, y1)):
                draw.ellipse([x - r, y - r, x + r, y + r], fill=colour)
        elif kind == "quad":
            draw.polygon([tuple(p) for p in geom], fill=colour)
            draw.line([tuple(p) for p in geom] + [tuple(geom[0])], fill=colour, width=int(round(w)))
        else:
            (cx, cy), r = geom
            draw.ellipse([cx - r, cy - r, cx + r, cy + r], fill=colour)


def _occlude(img: Image.Image, rng: np.random.Generator, joints: np.ndarray, size: int, ss: int) -> np.ndarray:
    """Paste a textured patch over part of the figure; returns the mask of joints it covers."""
    inside = np.flatnonzero(((joints >= 0) & (joints <= size - 1)).all(axis=1))
    anchor = joints[rng.choice(inside)] if inside.size else np.full(2, (size - 1) / 2)
    half = rng.uniform(0.09, 0.18, 2) * size
    centre = anchor + rng.uniform(-0.5, 0.5, 2) * half
    x0, y0 = np.maximum(np.floor(centre - half), 0).astype(int)
    x1, y1 = np.minimum(np.ceil(centre + half), size).astype(int)
    if x1 <= x0 or y1 <= y0:
        return np.zeros(len(joints), bool)
    w, h = (x1 - x0) * ss, (y1 - y0) * ss
    patch = np.array(random_colour(rng)) + (value_noise(rng, h, w, 4)[..., None] - 0.5) * 80
    img.paste(Image.fromarray(to_uint8(patch)), (x0 * ss, y0 * ss))
    # a pixel k spans [k - 0.5, k + 0.5] in joint coordinates
    return ((joints[:, 0] >= x0 - 0.5) & (joints[:, 0] < x1 - 0.5)
            & (joints[:, 1] >= y0 - 0.5) & (joints[:, 1] < y1 - 0.5))


def render_pose(rng: np.random.Generator, size: int) -> tuple[Image.Image, np.ndarray, np.ndarray]:
    """One image with its joints [16, 2] (rounded to 2 decimals) and visibility [16] (0/1)."""
    ss = SUPERSAMPLE
    pose = sample_pose(rng, size)
    img = _background(rng, size * ss)
    _draw_figure(img, rng, pose, ss)
    joints = np.round(pose["joints"], 2)
    visible = ((joints >= 0) & (joints <= size - 1)).all(axis=1)
    if rng.random() < OCCLUDER_RATE:
        visible &= ~_occlude(img, rng, joints, size, ss)
    return downsample(img, size), joints, visible.astype(int)


def generate_poses(out: str | Path, n_train: int = 2000, n_test: int = 500, seed: int = 0,
                   size: int = 64) -> Path:
    """Write ``n_train + n_test`` stick-figure images and ``poses.json``; returns the json's path."""
    out = Path(out)
    check_args("generate_poses", seed=seed, size=size, min_size=16, n_train=n_train, n_test=n_test)
    records = []
    for i in tqdm(range(n_train + n_test), desc="poses", unit="img"):
        img, joints, visible = render_pose(item_rng(seed, "poses", i), size)
        name = f"images/{i:06d}.png"
        save_image(img, out / name)
        records.append({"file": name, "split": "train" if i < n_train else "test", "width": size,
                        "height": size, "joints": joints.tolist(), "visible": visible.tolist()})
    path = out / "poses.json"
    write_json(path, {"joint_names": list(MPII_JOINTS), "images": records})
    return path
