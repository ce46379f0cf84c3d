"""Box rooms: the embedded stand-in for the LSUN room-layout set, layout type 5.

Conventions of the LSUN release, as found in public code (see ``capdata.readers.lsun`` too):

* Split files ``training.mat`` / ``validation.mat`` hold a 1xN struct array in a variable named like
  the file, fields in this order: ``image`` (name, no extension), ``scene`` (str), ``type`` (layout
  type 0..10), ``point`` (Kx2 keypoints, columns x y) and ``resolution`` ([H W]). Sources:
  leVirve/lsun-room ``lib/lsun_room_api/lsun_room/loader.py`` (``get_meta``: ``loadmat(f'{phase}.mat')
  [phase][0]``, ``name=m[0][0], scene=m[1][0], type=m[2][0][0], points=m[3], resolution=m[4][0]``) and
  an LSUN->wireframe converter that reads ``height, width = r['resolution']``. The same repo counts
  images per type with ``counter[type] += 1``, so ``type`` is stored as an integer class here (uint8).
* Images ``images/<image>.jpg``; per-image maps ``layout_seg/<image>.mat`` with a variable ``layout``
  (uint8 [H, W]); the converter above reads ``loadmat(...)['layout']``.
* Surface ids of the surface-relabelled maps: 1 frontal wall, 2 left wall, 3 right wall, 4 floor,
  5 ceiling (leVirve/lsun-room ``lsun_room/label.py``, ``class Layout``; the same enum in the
  wireframe converter). The original 2015 toolkit (``getSegmentation.m``) numbers regions by
  connected component instead; we write the surface ids, which is what ``readers.lsun`` expects.
* Layout type 5 (leVirve/lsun-room ``label.py`` ``type5`` and the toolkit's ``RoomLayoutTypes.m``,
  typeid 5: 6 corners, ``lines = [1 2; 1 3; 1 4; 4 5; 4 6]``): the camera faces a vertical room
  corner; four surfaces are seen -- left wall (corners 1 2 4 5), right wall (1 3 4 6), floor (4 5 6)
  and ceiling (1 2 3); no frontal wall. Keypoint 1 is the ceiling corner where both walls meet the
  ceiling, 4 the floor corner; 2 / 3 are where the ceiling's left / right edge leaves the image and
  5 / 6 where the floor's left / right edge leaves it.

Every synthetic room is of type 5: a camera inside a box room of random proportions looks toward one
vertical corner with random yaw, pitch, roll, field of view and position, so the six keypoints and
the four regions move continuously. Surfaces get their own textures (stripes, checker, planks,
noise) and colours; furniture-like boxes, wall rectangles (pictures, windows, doors) and blobs are
drawn over them without changing the map, as in LSUN where the map labels the surface behind
furniture. Keypoints are computed in the pose generator's pixel convention ((0, 0) is the centre of
the top-left pixel; edge endpoints clipped to [0, size - 1]) and written 1-based, as the release's
MATLAB coordinates are. training.mat = train items, validation.mat = test.
"""
from __future__ import annotations

import io
from pathlib import Path

import numpy as np
import scipy.io
from PIL import Image, ImageDraw
from tqdm import tqdm

from capcore.errors import CapawareError
from capdata.synthetic.drawing import (
    SUPERSAMPLE,
    check_args,
    downsample,
    item_rng,
    save_image,
    to_uint8,
    write_bytes,
)

LSUN_IDS = {"frontal": 1, "left": 2, "right": 3, "floor": 4, "ceiling": 5}
TYPE5_IDS = (2, 3, 4, 5)
"""Surfaces of LSUN layout type 5: left wall, right wall, floor, ceiling."""
LAYOUT_TYPE = 5
SCENES = ("bedroom", "living_room", "dining_room", "office", "hotel_room", "conference_room", "classroom")
MIN_SURFACE_FRACTION = 0.03
"""A sampled view is kept only if every type-5 surface covers at least this share of the frame."""
MAT_HEADER = b"MATLAB 5.0 MAT-file, Platform: posix, Created by: capaware synthetic rooms".ljust(116)
"""Replaces scipy's header text, which carries the write time: identical seeds give identical bytes."""
JPEG_QUALITY = 92

# plane index -> (axis, which bound, LSUN id); ids 0 mark the two walls behind the camera
_PLANES = ((0, 0, LSUN_IDS["left"]), (2, 0, LSUN_IDS["right"]), (1, 0, LSUN_IDS["floor"]),
           (1, 1, LSUN_IDS["ceiling"]), (0, 1, 0), (2, 1, 0))


class Camera:
    """A pinhole camera (square image) inside the room box [0, Lx] x [0, H] x [0, Lz] (y up).

    The corner it faces is the vertical edge x = z = 0, so the wall x = 0 appears on the left and
    z = 0 on the right.
    """

    def __init__(self, room: np.ndarray, pos: np.ndarray, yaw: float, pitch: float, roll: float, fov: float):
        self.room, self.pos = room, pos
        f = np.array([np.cos(pitch) * np.cos(yaw), np.sin(pitch), np.cos(pitch) * np.sin(yaw)])
        right = np.cross(f, [0.0, 1.0, 0.0])
        right /= np.linalg.norm(right)
        up = np.cross(right, f)
        self.forward = f
        self.right = np.cos(roll) * right + np.sin(roll) * up
        self.up = -np.sin(roll) * right + np.cos(roll) * up
        self.tan = np.tan(fov / 2)

    def rays(self, n: int) -> np.ndarray:
        """[n, n, 3] world directions through the pixel centres of an n x n image."""
        ndc = (np.arange(n) + 0.5) / n * 2 - 1
        u, v = np.meshgrid(ndc, ndc)
        return (self.forward + (u * self.tan)[..., None] * self.right - (v * self.tan)[..., None] * self.up)

    def project(self, points: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
        """Image coordinates [K, 2] (pixel centres at integers) and camera depths [K] of world points."""
        d = np.atleast_2d(points) - self.pos
        z = d @ self.forward
        safe = np.where(np.abs(z) < 1e-9, 1e-9, z)
        u = (d @ self.right) / (safe * self.tan)
        v = -(d @ self.up) / (safe * self.tan)
        return np.stack([(u + 1) / 2 * n - 0.5, (v + 1) / 2 * n - 0.5], axis=1), z

    def hit(self, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per pixel: the first room plane the ray meets (index into _PLANES), its distance and hit point."""
        d = self.rays(n)
        ts = np.full((len(_PLANES),) + d.shape[:2], np.inf)
        for k, (axis, bound, _) in enumerate(_PLANES):
            comp = d[..., axis]
            target = self.room[axis] * bound
            with np.errstate(divide="ignore", invalid="ignore"):
                t = (target - self.pos[axis]) / comp
            ts[k] = np.where((t > 0) & np.isfinite(t), t, np.inf)
        plane = ts.argmin(axis=0)
        t = np.take_along_axis(ts, plane[None], axis=0)[0]
        return plane, t, self.pos + d * t[..., None]


def layout_map(cam: Camera, n: int) -> np.ndarray:
    """uint8 [n, n] LSUN surface ids at the pixel centres (0 where a wall behind the camera shows)."""
    ids = np.array([p[2] for p in _PLANES], dtype=np.uint8)
    return ids[cam.hit(n)[0]]


def _edge_end(cam: Camera, start: np.ndarray, end: np.ndarray, n: int) -> np.ndarray:
    """Where the projected room edge start->end leaves the image.

    A 3-D segment in front of the camera projects to a 2-D segment, so: clip the edge at the camera's
    near plane, project both ends, and clip that 2-D segment against the image (Liang-Barsky).
    """
    (z0, z1) = (np.stack([start, end]) - cam.pos) @ cam.forward
    near = 1e-4
    if z1 < near:
        end = start + (z0 - near) / (z0 - z1) * (end - start)
    (p0, p1), _ = cam.project(np.stack([start, end]), n)
    step, t_exit = p1 - p0, 1.0
    for axis in range(2):
        if step[axis] > 0:
            t_exit = min(t_exit, (n - 0.5 - p0[axis]) / step[axis])
        elif step[axis] < 0:
            t_exit = min(t_exit, (-0.5 - p0[axis]) / step[axis])
    return np.clip(p0 + max(t_exit, 0.0) * step, 0, n - 1)


def keypoints(cam: Camera, n: int) -> np.ndarray:
    """The six LSUN type-5 corners [6, 2] in the order of ``RoomLayoutTypes.m`` (see module doc)."""
    lx, h, lz = cam.room
    ceil, floor = np.array([0.0, h, 0.0]), np.zeros(3)
    (c1, c4), _ = cam.project(np.stack([ceil, floor]), n)
    return np.stack([
        c1, _edge_end(cam, ceil, np.array([0.0, h, lz]), n), _edge_end(cam, ceil, np.array([lx, h, 0.0]), n),
        c4, _edge_end(cam, floor, np.array([0.0, 0.0, lz]), n), _edge_end(cam, floor, np.array([lx, 0.0, 0.0]), n),
    ])


def sample_camera(rng: np.random.Generator, n: int) -> tuple[Camera, np.ndarray]:
    """A random room and a view of its corner that shows exactly the four type-5 surfaces, with its
    n x n layout map."""
    for _ in range(500):
        room = np.array([rng.uniform(3.0, 7.0), rng.uniform(2.4, 3.4), rng.uniform(3.0, 7.0)])
        pos = np.array([rng.uniform(0.45, 0.95) * room[0], rng.uniform(1.0, min(1.9, room[1] - 0.4)),
                        rng.uniform(0.45, 0.95) * room[2]])
        yaw = np.arctan2(-pos[2], -pos[0]) + np.radians(rng.uniform(-20, 20))
        cam = Camera(room, pos, yaw, np.radians(rng.uniform(-12, 12)), np.radians(rng.uniform(-4, 4)),
                     np.radians(rng.uniform(55, 80)))
        corners, depth = cam.project(np.array([[0.0, room[1], 0.0], [0.0, 0.0, 0.0]]), n)
        margin = 0.1 * n
        if (depth <= 0).any() or (corners < margin).any() or (corners > n - 1 - margin).any():
            continue
        seg = layout_map(cam, n)
        share = np.array([(seg == k).mean() for k in TYPE5_IDS])
        if (seg != 0).all() and (share >= MIN_SURFACE_FRACTION).all():
            return cam, seg
    raise RuntimeError("no type-5 view found in 500 tries")  # unreachable with the ranges above


# ----------------------------------------------------------------------------------------- drawing
def _value_noise_at(rng: np.random.Generator, u: np.ndarray, v: np.ndarray, cell: float) -> np.ndarray:
    """Smooth noise in [-1, 1] at surface coordinates (metres), bilinear on a random lattice."""
    grid = rng.uniform(-1, 1, (64, 64))
    gu, gv = np.abs(u) / cell, np.abs(v) / cell
    i0, j0 = np.floor(gu).astype(int) % 63, np.floor(gv).astype(int) % 63
    fu, fv = gu - np.floor(gu), gv - np.floor(gv)
    top = grid[i0, j0] * (1 - fv) + grid[i0, j0 + 1] * fv
    bottom = grid[i0 + 1, j0] * (1 - fv) + grid[i0 + 1, j0 + 1] * fv
    return top * (1 - fu) + bottom * fu


def _texture(rng: np.random.Generator, kind: str, u: np.ndarray, v: np.ndarray) -> np.ndarray:
    """A pattern in about [-1, 1] on surface coordinates (u along the surface, v across it)."""
    period = rng.uniform(0.15, 0.8)
    if kind == "stripes":
        return np.sign(np.sin(2 * np.pi * u / period)) * 0.6 + 0.4 * np.sin(2 * np.pi * u / period)
    if kind == "checker":
        return ((np.floor(u / period) + np.floor(v / period)) % 2) * 2 - 1.0
    if kind == "planks":
        plank = np.floor(u / (period * 0.5))
        shade = np.sin(plank * 12.9898 + rng.uniform(0, 100)) * 0.8  # per-plank tone, deterministic
        seam = (np.abs(u / (period * 0.5) - np.round(u / (period * 0.5))) < 0.06) * -1.0
        return shade + seam + 0.3 * _value_noise_at(rng, u * 0.3, v * 4, 0.3)
    if kind == "noise":
        return _value_noise_at(rng, u, v, rng.uniform(0.1, 0.6))
    return np.zeros_like(u)


def _surface_style(rng: np.random.Generator, label: int, wall_colour: np.ndarray) -> tuple:
    if label in (LSUN_IDS["left"], LSUN_IDS["right"]):
        colour = wall_colour if rng.random() < 0.7 else rng.uniform(60, 240, 3)
        kind = rng.choice(["plain", "stripes", "noise", "checker"], p=[0.3, 0.3, 0.3, 0.1])
    elif label == LSUN_IDS["floor"]:
        colour = rng.uniform(40, 200, 3) * np.array([1.0, rng.uniform(0.7, 1.0), rng.uniform(0.4, 1.0)])
        kind = rng.choice(["planks", "checker", "noise", "plain"], p=[0.35, 0.3, 0.25, 0.1])
    else:
        colour = rng.uniform(180, 250, 3)
        kind = rng.choice(["plain", "noise", "checker"], p=[0.5, 0.35, 0.15])
    return colour, str(kind), rng.uniform(0.08, 0.35), rng.uniform(0.65, 1.0)


def _render_surfaces(rng: np.random.Generator, cam: Camera, px: int) -> np.ndarray:
    """float [px, px, 3]: every room surface textured and shaded, per pixel and vectorised."""
    plane, dist, point = cam.hit(px)
    img = np.zeros((px, px, 3))
    wall_colour = rng.uniform(70, 240, 3)
    coords = {LSUN_IDS["left"]: (2, 1), LSUN_IDS["right"]: (0, 1), LSUN_IDS["floor"]: (0, 2),
              LSUN_IDS["ceiling"]: (0, 2)}
    for k, (_, _, label) in enumerate(_PLANES):
        mask = plane == k
        if label == 0 or not mask.any():
            continue
        colour, kind, contrast, light = _surface_style(rng, label, wall_colour)
        ua, va = coords[label]
        pattern = _texture(rng, kind, point[mask][:, ua], point[mask][:, va])
        shade = light / (1 + 0.05 * dist[mask])
        img[mask] = colour * (1 + contrast * pattern[:, None]) * shade[:, None]
    return img


def _box_faces(lo: np.ndarray, hi: np.ndarray) -> list[tuple[np.ndarray, np.ndarray, float]]:
    """(corners [4, 3], outward normal, brightness) of the six faces of an axis-aligned box."""
    faces = []
    for axis in range(3):
        for bound, sign in ((lo, -1.0), (hi, 1.0)):
            a, b = [i for i in range(3) if i != axis]
            quad = []
            for ca, cb in ((0, 0), (1, 0), (1, 1), (0, 1)):
                p = np.empty(3)
                p[axis] = bound[axis]
                p[a] = (lo, hi)[ca][a]
                p[b] = (lo, hi)[cb][b]
                quad.append(p)
            normal = np.zeros(3)
            normal[axis] = sign
            faces.append((np.array(quad), normal, (0.75, 0.9, 1.1)[axis] if axis != 1 else (0.6, 1.15)[sign > 0]))
    return faces


def _draw_objects(img: Image.Image, rng: np.random.Generator, cam: Camera, px: int) -> None:
    """Furniture boxes, wall rectangles and blobs in 3-D, drawn over the surfaces (the map is untouched)."""
    lx, h, lz = cam.room
    draw = ImageDraw.Draw(img)
    shapes = []  # (depth, kind, geometry, colour)
    for _ in range(int(rng.integers(1, 5))):
        kind = rng.choice(["box", "wall_rect", "blob"], p=[0.5, 0.3, 0.2])
        colour = rng.uniform(20, 235, 3)
        on_left = rng.random() < 0.5
        along = lz if on_left else lx
        if kind == "wall_rect":
            w = rng.uniform(0.4, 1.4)
            u0 = rng.uniform(0.1, max(0.2, along - w - 0.1))
            if rng.random() < 0.3:  # a door
                v0, v1 = 0.0, min(h - 0.1, rng.uniform(1.9, 2.2))
            else:  # a picture or a window
                v0 = rng.uniform(0.7, 1.4)
                v1 = min(h - 0.15, v0 + rng.uniform(0.3, 1.1))
            uv = [(u0, v0), (u0 + w, v0), (u0 + w, v1), (u0, v1)]
            eps = 1e-3
            pts = np.array([[eps, v, u] if on_left else [u, v, eps] for u, v in uv])
            xy, z = cam.project(pts, px)
            if (z > 0.05).all():
                shapes.append((float(z.mean()) + 100.0, "poly", xy, colour))  # on a wall: drawn first
        elif kind == "box":
            w, d, ht = rng.uniform(0.5, 2.0), rng.uniform(0.4, 1.2), rng.uniform(0.3, 1.3)
            u0 = rng.uniform(0.0, max(0.1, along - w))
            if rng.random() < 0.7:  # against a wall
                lo = np.array([0.0, 0.0, u0]) if on_left else np.array([u0, 0.0, 0.0])
                hi = lo + (np.array([d, ht, w]) if on_left else np.array([w, ht, d]))
            else:  # free-standing
                lo = np.array([rng.uniform(0.3, lx - 1.0), 0.0, rng.uniform(0.3, lz - 1.0)])
                hi = lo + np.array([w, ht, d])
            hi = np.minimum(hi, [lx, h, lz])
            if lo[0] - 0.3 < cam.pos[0] < hi[0] + 0.3 and lo[2] - 0.3 < cam.pos[2] < hi[2] + 0.3:
                continue  # the camera would stand inside it
            for quad, normal, bright in _box_faces(lo, hi):
                if normal @ (cam.pos - quad.mean(axis=0)) <= 0:
                    continue  # back face
                xy, z = cam.project(quad, px)
                if (z > 0.05).all():
                    shapes.append((float(np.linalg.norm(quad.mean(axis=0) - cam.pos)), "poly", xy,
                                   colour * bright))
        else:
            centre = np.array([rng.uniform(0.3, lx - 0.3), rng.uniform(0.2, 1.2), rng.uniform(0.3, lz - 0.3)])
            radius = rng.uniform(0.15, 0.45)
            (xy,), (z,) = cam.project(centre, px)
            if z > 0.3:
                r = radius / (z * cam.tan) * px / 2
                aspect = rng.uniform(0.6, 1.6)
                shapes.append((float(z), "ellipse", (xy, r * aspect, r / aspect), colour))
    for _, kind, geom, colour in sorted(shapes, key=lambda s: -s[0]):
        fill = tuple(int(c) for c in np.clip(colour, 0, 255))
        if kind == "poly":
            draw.polygon([tuple(p) for p in geom], fill=fill)
        else:
            (cx, cy), rx, ry = geom
            draw.ellipse([cx - rx, cy - ry, cx + rx, cy + ry], fill=fill)


def render_room(rng: np.random.Generator, size: int) -> tuple[Image.Image, np.ndarray, np.ndarray]:
    """One type-5 room: RGB image, layout map uint8 [size, size] (LSUN ids) and keypoints [6, 2]."""
    cam, seg = sample_camera(rng, size)
    points = np.round(keypoints(cam, size), 2)
    px = size * SUPERSAMPLE
    surfaces = _render_surfaces(rng, cam, px)
    surfaces += 3.0 * rng.standard_normal(surfaces.shape, dtype=np.float32)  # sensor noise
    img = Image.fromarray(to_uint8(surfaces))
    _draw_objects(img, rng, cam, px)
    return downsample(img, size), seg, points


def mat_bytes(mdict: dict, compress: bool) -> bytes:
    """A MAT v5 file as bytes, with a fixed header text so that equal content gives equal bytes."""
    buf = io.BytesIO()
    scipy.io.savemat(buf, mdict, do_compression=compress, oned_as="row")
    data = bytearray(buf.getvalue())
    data[:116] = MAT_HEADER
    return bytes(data)


def _split_struct(entries: list[dict]) -> np.ndarray:
    fields = ("image", "scene", "type", "point", "resolution")
    arr = np.zeros((1, len(entries)), dtype=[(f, object) for f in fields])
    for i, e in enumerate(entries):
        arr[0, i] = tuple(e[f] for f in fields)
    return arr


def generate_rooms(out: str | Path, n_train: int = 2000, n_test: int = 500, seed: int = 0,
                   size: int = 64) -> Path:
    """Write the rooms in the LSUN release layout; returns the path of ``training.mat``.

    ``validation.mat`` is written after all images, then ``training.mat`` last.
    """
    out = Path(out)
    check_args("generate_rooms", seed=seed, size=size, min_size=16, n_train=n_train, n_test=n_test)
    entries: dict[str, list[dict]] = {"training": [], "validation": []}
    for i in tqdm(range(n_train + n_test), desc="rooms", unit="img"):
        rng = item_rng(seed, "rooms", i)
        img, seg, points = render_room(rng, size)
        if not np.isin(seg, TYPE5_IDS).all():  # guarded by sample_camera; a broken map must not ship
            raise CapawareError(f"room {i}", "layout map holds a surface outside type 5", "report this bug")
        name = f"synth_{i:06d}"
        save_image(img, out / "images" / f"{name}.jpg", quality=JPEG_QUALITY)
        write_bytes(out / "layout_seg" / f"{name}.mat", mat_bytes({"layout": seg}, compress=True))
        entries["training" if i < n_train else "validation"].append({
            "image": name, "scene": SCENES[int(rng.integers(len(SCENES)))],
            "type": np.array([[LAYOUT_TYPE]], dtype=np.uint8), "point": points.astype(np.float64) + 1.0,
            "resolution": np.array([[size, size]], dtype=np.float64)})
    for split in ("validation", "training"):
        write_bytes(out / f"{split}.mat", mat_bytes({split: _split_struct(entries[split])}, compress=False))
    return out / "training.mat"
