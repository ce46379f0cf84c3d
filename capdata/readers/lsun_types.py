"""LSUN's 11 room-layout types, and the rule that names the regions of an original-release map.

Why this exists. The original LSUN release numbers the regions of ``layout_seg/<image>.mat`` 1..K in
the order MATLAB's ``bwconncomp`` meets them (column-major), per image: the numbers say nothing about
which surface a region is. Only the room ``type`` and its corners (``point``) do. No maintained
library converts them, so the rule is written here and tested on maps drawn in that numbering.

Each type fixes its corner count and which surfaces it shows, each surface by its corners (1-based
corner numbers, as the toolkit's ``RoomLayoutTypes.m`` numbers them; the same tables are used by
public converters, e.g. leVirve/lsun-room ``label.py``). Two surfaces that share two corners meet
along the line through them (the toolkit's ``lines``), and a surface is a convex polygon clipped by
the image, so it is the intersection of half-planes: for each line it shares with a neighbour, the
side that holds its other corners (the neighbour's other corners lie on the far side). Where both
surfaces of a line have no other corner (types 8, 9, 10: one line across the image), ``LINE_SIDES``
says which one is above or left.

The rule (``name_regions``): every region goes to the surface whose half-plane intersection (each
line moved ``MARGIN`` px inwards, so that corner rounding and boundary pixels do not count) holds the
most of its pixels, if that is more than ``MAJORITY`` times the runner-up; a region that no surface
reaches, or one split between two, is refused. Voting over whole regions, instead of sampling one
pixel per surface, lets neither a corner off by a pixel nor a sliver of a surface flip a label.

Corner coordinates: the release's are MATLAB's, 1-based (the centre of the top-left pixel is (1, 1)),
fractional, and may lie outside the image; callers pass them 0-based (``point - 1``).
"""
from __future__ import annotations

import numpy as np

SURFACE_IDS = {"front": 1, "left": 2, "right": 3, "floor": 4, "ceiling": 5}
"""The surface-relabelled copy's ids (LSUN2016_surface_relabel; leVirve/lsun-room ``Layout``)."""

# type -> (corner count, {surface: its corners})
LAYOUT_TYPES: dict[int, tuple[int, dict[str, tuple[int, ...]]]] = {
    0: (8, {"left": (1, 2, 3, 4), "right": (5, 6, 7, 8), "front": (1, 3, 5, 7), "floor": (3, 4, 5, 6),
            "ceiling": (1, 2, 7, 8)}),
    1: (6, {"left": (1, 2, 3), "right": (4, 5, 6), "front": (1, 2, 4, 5), "floor": (1, 3, 4, 6)}),
    2: (6, {"left": (1, 2, 3), "right": (4, 5, 6), "front": (1, 3, 4, 6), "ceiling": (1, 2, 4, 5)}),
    3: (4, {"left": (1, 2, 3), "right": (1, 3, 4), "ceiling": (1, 2, 4)}),
    4: (4, {"left": (1, 2, 3), "right": (1, 3, 4), "floor": (1, 2, 4)}),
    5: (6, {"left": (1, 2, 4, 5), "right": (1, 3, 4, 6), "floor": (4, 5, 6), "ceiling": (1, 2, 3)}),
    6: (4, {"ceiling": (1, 2), "front": (1, 2, 3, 4), "floor": (3, 4)}),
    7: (4, {"left": (1, 2), "front": (1, 2, 3, 4), "right": (3, 4)}),
    8: (2, {"ceiling": (1, 2), "front": (1, 2)}),
    9: (2, {"front": (1, 2), "floor": (1, 2)}),
    10: (2, {"left": (1, 2), "right": (1, 2)}),
}
LINE_SIDES = {8: ("ceiling", "above"), 9: ("front", "above"), 10: ("left", "left")}
"""Types whose one line has no other corner: the surface on the named side (the other is opposite)."""
MARGIN = 1.0
"""Pixels within this distance (px) of a dividing line do not vote."""
MAJORITY = 2.0
"""A region's best surface must hold this many times the pixels of its second best."""
_SIDES = {"above": (0.0, -1.0), "below": (0.0, 1.0), "left": (-1.0, 0.0), "right": (1.0, 0.0)}


def corner_count(layout_type: int) -> int:
    """How many corners LSUN's ``point`` holds for ``layout_type`` (0..10)."""
    return LAYOUT_TYPES[layout_type][0]


def half_planes(layout_type: int, corners: np.ndarray) -> dict[str, list[tuple[np.ndarray, float]]]:
    """Per surface, its half-planes as (unit normal n, offset c): inside where n . (x, y) > c.

    ``corners``: [K, 2] (x, y), 0-based pixel-centre coordinates (module doc).
    """
    pts = np.asarray(corners, dtype=np.float64)
    surfaces = LAYOUT_TYPES[layout_type][1]
    out: dict[str, list] = {s: [] for s in surfaces}
    for s, mine in surfaces.items():
        for t, theirs in surfaces.items():
            shared = sorted(set(mine) & set(theirs))
            if t == s or len(shared) != 2:
                continue
            a, b = pts[shared[0] - 1], pts[shared[1] - 1]
            length = float(np.hypot(*(b - a)))
            if length == 0:
                continue  # two corners on one pixel: no line (the other half-planes still hold)
            n = np.array([a[1] - b[1], b[0] - a[0]]) / length
            offset = lambda q: float(n @ (q - a))  # noqa: E731  signed distance of q from the line
            mine_off = [offset(pts[i - 1]) for i in mine if i not in shared]
            theirs_off = [-offset(pts[i - 1]) for i in theirs if i not in shared]
            votes = mine_off + theirs_off
            if votes and max(votes, key=abs) != 0:
                sign = np.sign(max(votes, key=abs))
            else:  # one line across the image (LINE_SIDES)
                named, side = LINE_SIDES[layout_type]
                sign = np.sign(n @ np.array(_SIDES[side])) * (1 if s == named else -1)
            out[s].append((sign * n, float(sign * n @ a)))
    return out


def surface_areas(layout_type: int, corners: np.ndarray, shape: tuple[int, int]) -> dict[str, np.ndarray]:
    """Per surface of ``layout_type``: the pixels of an H x W map farther than MARGIN inside all of its
    half-planes (``half_planes``): the pixels known to be on it."""
    ys, xs = np.mgrid[0:shape[0], 0:shape[1]].astype(np.float64)
    areas = {}
    for surface, planes in half_planes(layout_type, corners).items():
        inside = np.ones(shape, dtype=bool)
        for n, c in planes:
            inside &= n[0] * xs + n[1] * ys - c > MARGIN
        areas[surface] = inside if planes else np.zeros(shape, dtype=bool)
    return areas


def name_regions(regions: np.ndarray, layout_type: int, corners: np.ndarray) -> dict[int, str]:
    """{region id: surface name} for a map of region ids, by majority vote (module doc).

    Raises ValueError (its text says which region and why) when a region cannot be named.
    """
    areas = surface_areas(layout_type, corners, regions.shape)
    names = list(areas)
    ids = np.unique(regions)
    # votes[r, s]: pixels of region ids[r] inside surface s's known area
    index = np.searchsorted(ids, regions)
    votes = np.stack([np.bincount(index[areas[s]], minlength=len(ids)) for s in names], axis=1)
    out = {}
    for r, region in enumerate(ids.tolist()):
        order = np.argsort(-votes[r], kind="stable")
        best = votes[r, order[0]]
        second = votes[r, order[1]] if len(order) > 1 else 0
        if best == 0:
            raise ValueError(f"region {region} lies on no surface of layout type {layout_type} "
                             f"({', '.join(names)}) by its corners")
        if best <= MAJORITY * second:
            raise ValueError(f"region {region} is split between {names[order[0]]} ({best} px) and "
                             f"{names[order[1]]} ({second} px) by the corners of layout type {layout_type}")
        out[int(region)] = names[order[0]]
    return out


def is_region_numbering(regions: np.ndarray) -> bool:
    """Whether ids are 1..K, numbered in the order a column-major scan meets them (``bwconncomp``)."""
    ids = np.unique(regions)
    if ids.tolist() != list(range(1, len(ids) + 1)):
        return False
    flat = regions.ravel(order="F")
    first = np.array([np.argmax(flat == v) for v in ids])
    return bool(np.all(np.diff(first) > 0))


__all__ = ["LAYOUT_TYPES", "LINE_SIDES", "SURFACE_IDS", "corner_count", "half_planes", "surface_areas", "name_regions",
           "is_region_numbering"]
