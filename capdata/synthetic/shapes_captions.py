"""Shapes-captions: the embedded stand-in for COCO captions.

A scene holds 1-4 flat shapes (circle, square, triangle, star, cross, hexagon), each with a colour
(red, green, blue, yellow, purple, orange), a size (small, large) and a position, on a plain or lightly
textured background. Repeating a (shape, colour) pair is likely, so counts matter ("two red circles").

Each image gets five captions written by different strategies -- full enumeration with counts, total
count, a spatial relation between two objects, a partial mention, shape-only or colour-only counts,
one object's position -- with synonyms (square/box, circle/disc, cross/plus sign, purple/violet,
small/little/tiny, large/big, grey/gray, a/one/a single, two/a pair of) and varied word order. Most
captions leave some objects out, as real captions do, so distances between caption sets are graded.

Every caption is true of its scene. An explicit count ("one", "a single", "two", "a pair of", "three",
"four") before an optional size, optional colour and a noun (a shape, or "shapes"/"objects") always
equals the number of objects that match all the words given; a size word is used only when every
object it describes has that size. Plain "a" is an indefinite article and claims nothing about counts.

Written files (Karpathy's format, read by ``capdata.readers.karpathy``)::

    DIR/dataset_coco.json {"images": [{"filepath": "images", "filename": "000000.png", "imgid": i,
                                       "cocoid": 100000 + i, "split": "train"|"restval"|"val"|"test",
                                       "sentences": [{"tokens": [...], "raw": "...", "sentid": s,
                                                      "imgid": i} x 5],
                                       "sentids": [s, ...],
                                       "categories": [sorted shape names present],
                                       "attributes": {"shape": [...], "colour": [...], "object": [...],
                                                      "size": [...], "count": ["n"], "background": [...]},
                                       "width": size, "height": size,
                                       "objects": [{"shape", "colour", "size", "bbox": [x, y, w, h]}]}],
                           "dataset": "coco"}
    DIR/images/NNNNNN.png  RGB, size x size
    DIR/vectors.txt        word2vec text format: stand-in pretrained vectors (``word_vectors.py``)

Tokens are lower-case words without punctuation; ``raw`` is the sentence capitalised, with commas
and a final period. Splits come in blocks: train, restval (a quarter of ``n_train``, as in Karpathy's
COCO split where restval images are also trained on), val, test.
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from PIL import Image, ImageDraw
from tqdm import tqdm

from capdata.synthetic.drawing import (
    SHAPES_WORLD,
    SUPERSAMPLE,
    check_args,
    downsample,
    gradient,
    item_rng,
    save_image,
    to_uint8,
    value_noise,
    write_json,
)
from capdata.synthetic.lexicon import (
    BACKGROUND_WORDS,
    COLOUR_WORDS,
    COUNT_WORDS,
    GENERIC_NOUNS,
    SHAPE_WORDS,
    SIZE_WORDS,
)
from capdata.synthetic.word_vectors import write_word_vectors

SHAPES = ("circle", "square", "triangle", "star", "cross", "hexagon")
COLOURS = {"red": (220, 40, 40), "green": (40, 165, 60), "blue": (40, 80, 225), "yellow": (240, 210, 40),
           "purple": (140, 60, 185), "orange": (245, 140, 30)}
SIZES = {"small": 0.085, "large": 0.15}
"""Object radius as a fraction of the image side."""
BACKGROUNDS = {"white": (238, 238, 232), "black": (24, 24, 28), "grey": (128, 128, 128), "beige": (222, 205, 168)}
# the words for each of these: lexicon.py (SHAPE_WORDS, COLOUR_WORDS, SIZE_WORDS, BACKGROUND_WORDS, ...)
RESTVAL_FRACTION = 0.25
N_CAPTIONS = 5
VECTORS_FILE = "vectors.txt"
"""Stand-in pretrained word vectors for the captions' words, beside the json (``word_vectors.py``)."""


# ------------------------------------------------------------------------------------------ scenes
def sample_scene(rng: np.random.Generator, size: int) -> dict:
    """Objects (shape, colour, size, x, y, radius px, angle) placed without overlap, and a background."""
    n = int(rng.choice([1, 2, 3, 4], p=[0.2, 0.3, 0.28, 0.22]))
    objects: list[dict] = []
    for _ in range(n):
        if objects and rng.random() < 0.45:  # repeat a kind already present, so counts > 1 are common
            twin = objects[int(rng.integers(len(objects)))]
            shape, colour = twin["shape"], twin["colour"]
        else:
            shape, colour = SHAPES[int(rng.integers(len(SHAPES)))], str(rng.choice(list(COLOURS)))
        label = "large" if rng.random() < 0.5 else "small"
        for attempt in range(200):
            if attempt == 100:
                label = "small"  # crowded: fall back to a small object (captions use the final size)
            r = SIZES[label] * size * rng.uniform(0.9, 1.1)
            x, y = rng.uniform(r + 2, size - r - 2, 2)
            if all(np.hypot(x - o["x"], y - o["y"]) > r + o["r"] + 0.03 * size for o in objects):
                break
        objects.append({"shape": shape, "colour": colour, "size": label, "x": float(x), "y": float(y),
                        "r": float(r), "angle": float(rng.uniform(-20, 20))})
    return {"objects": objects, "background": str(rng.choice(list(BACKGROUNDS)))}


def _polygon(shape: str, x: float, y: float, r: float, angle: float) -> list[tuple[float, float]]:
    if shape == "square":
        radii, angles = np.full(4, 1.2 * r), np.arange(4) * 90 + 45
    elif shape == "triangle":
        radii, angles = np.full(3, 1.3 * r), np.arange(3) * 120 - 90
    elif shape == "hexagon":
        radii, angles = np.full(6, 1.08 * r), np.arange(6) * 60
    elif shape == "star":
        radii, angles = np.tile([1.35 * r, 0.58 * r], 5), np.arange(10) * 36 - 90
    else:  # cross: a plus sign, arms of half-width 0.36 r reaching 1.15 r
        a, b = 0.36 * r, 1.15 * r
        pts = np.array([(a, b), (a, a), (b, a), (b, -a), (a, -a), (a, -b),
                        (-a, -b), (-a, -a), (-b, -a), (-b, a), (-a, a), (-a, b)])
        radii, angles = np.hypot(pts[:, 0], pts[:, 1]), np.degrees(np.arctan2(pts[:, 1], pts[:, 0]))
    t = np.radians(angles + angle)
    return list(zip((x + radii * np.cos(t)).tolist(), (y + radii * np.sin(t)).tolist()))


def render_scene(rng: np.random.Generator, scene: dict, size: int) -> Image.Image:
    ss = SUPERSAMPLE
    px = size * ss
    base = np.array(BACKGROUNDS[scene["background"]], dtype=float)
    texture = (value_noise(rng, px, px, int(rng.integers(3, 10))) - 0.5) * rng.uniform(0, 24)
    texture = texture + (gradient(rng, px, px) - 0.5) * rng.uniform(0, 30)
    img = Image.fromarray(to_uint8(base + texture[..., None]))
    draw = ImageDraw.Draw(img)
    for o in scene["objects"]:
        fill = tuple(int(c) for c in np.clip(np.array(COLOURS[o["colour"]]) + rng.integers(-12, 13, 3), 0, 255))
        x, y, r = (o["x"] + 0.5) * ss - 0.5, (o["y"] + 0.5) * ss - 0.5, o["r"] * ss
        if o["shape"] == "circle":
            draw.ellipse([x - r, y - r, x + r, y + r], fill=fill)
        else:
            draw.polygon(_polygon(o["shape"], x, y, r, o["angle"]), fill=fill)
    return downsample(img, size)


def scene_attributes(scene: dict) -> dict[str, list[str]]:
    """What the captions talk about, per group: the targets of ``studies.probes.probe`` and of the attribute-supervised
    control stand-in (``pretrain.targets: attributes``). The default "Img" stand-in is told only each
    object's kind (from ``objects``), as ImageNet is told an object's class."""
    objs = scene["objects"]
    return {"shape": sorted({o["shape"] for o in objs}), "colour": sorted({o["colour"] for o in objs}),
            "object": sorted({f"{o['colour']} {o['shape']}" for o in objs}),
            "size": sorted({o["size"] for o in objs}), "count": [str(len(objs))],
            "background": [scene["background"]]}


def scene_objects(scene: dict) -> list[dict]:
    """Per object its words and its box in pixels ([x, y, w, h] of the circle it is drawn in, as COCO's
    instance ``bbox``): where class pretraining crops its object-centred views."""
    return [{"shape": o["shape"], "colour": o["colour"], "size": o["size"],
             "bbox": [round(o["x"] - o["r"], 2), round(o["y"] - o["r"], 2), round(2 * o["r"], 2), round(2 * o["r"], 2)]}
            for o in scene["objects"]]


# ---------------------------------------------------------------------------------------- captions
def _pick(rng: np.random.Generator, options):
    return options[int(rng.integers(len(options)))]


def _size_word(rng: np.random.Generator, objs: list[dict], p: float) -> list[str]:
    """A size adjective only when every described object has that size (keeps counts true)."""
    sizes = {o["size"] for o in objs}
    if len(sizes) == 1 and rng.random() < p:
        return [_pick(rng, SIZE_WORDS[sizes.pop()])]
    return []


def _noun_phrase(rng: np.random.Generator, objs: list[dict], *, shape: str | None, colour: str | None,
                 counted: bool, p_size: float = 0.3) -> list[str]:
    """'[count] [size] [colour] noun' describing exactly ``objs`` (count = len(objs) when counted)."""
    n = len(objs)
    count = _pick(rng, COUNT_WORDS[n]) if counted else "a"
    words = count.split() + _size_word(rng, objs, p_size)
    if colour is not None:
        words.append(_pick(rng, COLOUR_WORDS[colour]))
    singular, plural = _pick(rng, SHAPE_WORDS[shape]) if shape is not None else _pick(rng, GENERIC_NOUNS)
    words += (singular if n == 1 or not counted else plural).split()
    return words


def _join(phrases: list[list[str]]) -> list[str]:
    """'A', 'A and B', 'A, B and C' (the comma lives in raw only)."""
    out: list[str] = []
    for i, phrase in enumerate(phrases):
        if i and i == len(phrases) - 1:
            out.append("and")
        elif i:
            out.append(",")
        out += phrase
    return out


def _background_phrase(rng: np.random.Generator, scene: dict) -> list[str]:
    prep = _pick(rng, ("on", "against"))
    return [prep, "a", _pick(rng, BACKGROUND_WORDS[scene["background"]]), "background"]


def _groups(objects: list[dict], key) -> list[tuple[tuple, list[dict]]]:
    """Objects grouped by ``key``, in order of first appearance."""
    out: dict[tuple, list[dict]] = {}
    for o in objects:
        out.setdefault(key(o), []).append(o)
    return list(out.items())


def _lead(rng: np.random.Generator, plural: bool) -> list[str]:
    """An opening that agrees in number with the first noun phrase."""
    options = ([], ["there", "are" if plural else "is"], ["an", "image", "of"], ["a", "picture", "of"],
               ["the", "image", "shows"], ["we", "see"] if plural else ["this", "is"])
    return list(_pick(rng, options))


def _is_plural(phrase: list[str]) -> bool:
    """Verb agreement of a noun phrase ("there is a pair of ...", "there are two ...")."""
    return phrase[0] not in ("a", "one")


def _cap_enumerate(rng, scene):
    groups = _groups(scene["objects"], lambda o: (o["shape"], o["colour"]))
    order = rng.permutation(len(groups)) if rng.random() < 0.5 else np.argsort([g[1][0]["x"] for g in groups])
    phrases = [_noun_phrase(rng, groups[i][1], shape=groups[i][0][0], colour=groups[i][0][1], counted=True)
               for i in order]
    words = _lead(rng, _is_plural(phrases[0])) + _join(phrases)
    return words + (_background_phrase(rng, scene) if rng.random() < 0.4 else [])


def _cap_total(rng, scene):
    objs = scene["objects"]
    words = _noun_phrase(rng, objs, shape=None, colour=None, counted=True, p_size=0.0)
    colours = {o["colour"] for o in objs}
    extra = rng.random()
    if len(objs) > 1 and extra < 0.3:
        words += ["of", "different", "colors"] if len(colours) > 1 else ["of", "the", "same", "color"]
    elif extra < 0.65:
        o = _pick(rng, objs)
        words += ["including"] + _noun_phrase(rng, [o], shape=o["shape"], colour=o["colour"], counted=False)
    lead = _pick(rng, ([], ["there", "are" if _is_plural(words) else "is"], ["a", "picture", "with"],
                       ["an", "image", "showing"]))
    return list(lead) + words + (_background_phrase(rng, scene) if rng.random() < 0.5 else [])


def _relation_words(a: dict, b: dict, rng: np.random.Generator) -> list[str]:
    dx, dy = b["x"] - a["x"], b["y"] - a["y"]
    if rng.random() < 0.25:
        return list(_pick(rng, (["next", "to"], ["beside"])))
    if abs(dx) >= abs(dy):
        return ["to", "the", "left" if dx > 0 else "right", "of"]
    return ["above" if dy > 0 else "below"]


def _cap_relation(rng, scene):
    objs = scene["objects"]
    i, j = rng.choice(len(objs), size=2, replace=False)
    a, b = objs[int(i)], objs[int(j)]
    rel = _relation_words(a, b, rng)
    first = _noun_phrase(rng, [a], shape=a["shape"], colour=a["colour"] if rng.random() < 0.85 else None,
                         counted=False)
    same = a["shape"] == b["shape"] and a["colour"] == b["colour"]
    second = _noun_phrase(rng, [b], shape=b["shape"], colour=b["colour"] if same or rng.random() < 0.85 else None,
                          counted=False)
    if same:
        second[0] = "another"
    return ["there", "is"] + first + rel + second if rng.random() < 0.2 else first + rel + second


def _cap_partial(rng, scene):
    groups = _groups(scene["objects"], lambda o: (o["shape"], o["colour"]))
    k = int(rng.integers(1, len(groups)))
    chosen = [groups[int(i)] for i in rng.choice(len(groups), size=k, replace=False)]
    phrases = [_noun_phrase(rng, objs, shape=s, colour=c, counted=True) for (s, c), objs in chosen]
    tail = _pick(rng, (["and", "some", "other", "shapes"], ["among", "other", "shapes"],
                       ["with", "other", "objects"], ["and", "more"]))
    if tail[0] == "and":  # "A, B and some other shapes", not "A and B and some other shapes"
        return _join(phrases + [tail[1:]])
    return _join(phrases) + tail


def _cap_shapes_only(rng, scene):
    groups = _groups(scene["objects"], lambda o: (o["shape"],))
    order = rng.permutation(len(groups))
    phrases = [_noun_phrase(rng, groups[i][1], shape=groups[i][0][0], colour=None, counted=True) for i in order]
    return _lead(rng, _is_plural(phrases[0])) + _join(phrases)


def _cap_colours_only(rng, scene):
    groups = _groups(scene["objects"], lambda o: (o["colour"],))
    order = rng.permutation(len(groups))
    phrases = [_noun_phrase(rng, groups[i][1], shape=None, colour=groups[i][0][0], counted=True, p_size=0.2)
               for i in order]
    return _join(phrases) + (_background_phrase(rng, scene) if rng.random() < 0.5 else [])


_REGION = {("top", "left"): "in the top left corner", ("top", "center"): "at the top",
           ("top", "right"): "in the top right corner", ("middle", "left"): "on the left",
           ("middle", "center"): "in the middle", ("middle", "right"): "on the right",
           ("bottom", "left"): "in the bottom left corner", ("bottom", "center"): "at the bottom",
           ("bottom", "right"): "in the bottom right corner"}


def _cap_position(rng, scene, size):
    o = _pick(rng, scene["objects"])
    col = ("left", "center", "right")[min(2, int(3 * o["x"] / size))]
    row = ("top", "middle", "bottom")[min(2, int(3 * o["y"] / size))]
    where = _REGION[(row, col)].split()
    if where == ["in", "the", "middle"] and rng.random() < 0.5:
        where = ["in", "the", "center", "of", "the", "image"]
    phrase = _noun_phrase(rng, [o], shape=o["shape"], colour=o["colour"] if rng.random() < 0.9 else None,
                          counted=False, p_size=0.4)
    return (["there", "is"] + phrase + where) if rng.random() < 0.3 else phrase + where


def _finish(words: list[str]) -> tuple[list[str], str]:
    """Tokens (lower-case, no punctuation) and raw (capitalised, commas, final period); a -> an."""
    flat = [t for w in words for t in (w.split() if w != "," else [","])]
    for i, t in enumerate(flat[:-1]):
        nxt = flat[i + 1]
        if t == "a" and nxt[0] in "aeiou":
            flat[i] = "an"
    raw = " ".join(flat).replace(" ,", ",")
    return [t for t in flat if t != ","], raw[0].upper() + raw[1:] + "."


def make_captions(rng: np.random.Generator, scene: dict, size: int) -> list[tuple[list[str], str]]:
    """Five distinct (tokens, raw) captions from different strategies."""
    n_obj = len(scene["objects"])
    n_groups = len({(o["shape"], o["colour"]) for o in scene["objects"]})
    strategies = {"enumerate": _cap_enumerate, "total": _cap_total, "shapes_only": _cap_shapes_only,
                  "colours_only": _cap_colours_only, "position": lambda r, s: _cap_position(r, s, size)}
    if n_obj >= 2:
        strategies["relation"] = _cap_relation
    if n_groups >= 2:
        strategies["partial"] = _cap_partial
    names = list(strategies)
    weights = np.array([{"enumerate": 4.0, "relation": 2.0, "partial": 1.5}.get(n, 1.0) for n in names])
    chosen = list(rng.choice(names, size=min(N_CAPTIONS, len(names)), replace=False, p=weights / weights.sum()))
    captions: list[tuple[list[str], str]] = []
    seen: set[str] = set()
    attempts = 0
    while len(captions) < N_CAPTIONS:
        name = chosen[len(captions)] if len(captions) < len(chosen) and attempts < 8 else str(rng.choice(names))
        tokens, raw = _finish(strategies[name](rng, scene))
        attempts += 1
        if " ".join(tokens) in seen and attempts < 40:
            continue
        seen.add(" ".join(tokens))
        captions.append((tokens, raw))
        attempts = 0
    return captions


def split_sizes(n_train: int, n_val: int | None, n_test: int | None) -> dict[str, int]:
    """Images per Karpathy split; val and test default to a tenth of n_train each (at least 1)."""
    n_val = max(1, round(n_train / 10)) if n_val is None else n_val
    n_test = max(1, round(n_train / 10)) if n_test is None else n_test
    restval = int(n_train * RESTVAL_FRACTION)
    return {"train": n_train - restval, "restval": restval, "val": n_val, "test": n_test}


UNLABELED_DIR = "unlabeled"
UNLABELED_FIRST_ID = 200000  # the unlabeled images' ids, from their file names (images.folder reads them so)


def generate_unlabeled(out: Path, n: int, seed: int, size: int) -> None:
    """``n`` images without captions, drawn from the same world as the captioned ones (scenes from generators
    seeded apart from theirs), as ``unlabeled/<id>.png``: Liu et al.'s unlabeled pool, which stage two reads
    through ``images.folder`` as it would read COCO's ``unlabeled2017``."""
    for i in tqdm(range(n), desc="unlabeled", unit="img"):
        rng = item_rng(seed, "unlabeled", i)
        scene = sample_scene(rng, size)
        save_image(render_scene(rng, scene, size), out / UNLABELED_DIR / f"{UNLABELED_FIRST_ID + i}.png")


def generate_captions(out: str | Path, n_train: int = 2000, n_test: int | None = None, seed: int = 0,
                      size: int = 128, n_val: int | None = None, n_unlabeled: int = 0) -> Path:
    """Write the shapes images, ``vectors.txt`` (``word_vectors.py``) and ``dataset_coco.json``;
    returns the json's path.

    ``n_train`` counts train + restval images; ``n_val`` / ``n_test`` default to n_train / 10; ``n_unlabeled``
    images without captions go to ``unlabeled/`` (none by default).
    """
    out = Path(out)
    check_args("generate_captions", seed=seed, size=size, min_size=32, n_train=n_train, n_val=n_val,
               n_test=n_test, n_unlabeled=n_unlabeled)
    generate_unlabeled(out, n_unlabeled, seed, size)
    splits = [name for name, k in split_sizes(n_train, n_val, n_test).items() for _ in range(k)]
    images = []
    for i in tqdm(range(len(splits)), desc="captions", unit="img"):
        rng = item_rng(seed, "captions", i)
        scene = sample_scene(rng, size)
        name = f"{i:06d}.png"
        save_image(render_scene(rng, scene, size), out / "images" / name)
        sentids = list(range(N_CAPTIONS * i, N_CAPTIONS * (i + 1)))
        sentences = [{"tokens": tokens, "raw": raw, "sentid": s, "imgid": i}
                     for s, (tokens, raw) in zip(sentids, make_captions(rng, scene, size))]
        images.append({"filepath": "images", "filename": name, "imgid": i, "cocoid": 100000 + i,
                       "split": splits[i], "sentences": sentences, "sentids": sentids,
                       "categories": sorted({o["shape"] for o in scene["objects"]}),
                       "attributes": scene_attributes(scene), "width": size, "height": size,
                       "objects": scene_objects(scene)})
    write_word_vectors(out / VECTORS_FILE)  # before the json: the annotation file is written last
    path = out / "dataset_coco.json"
    write_json(path, {"images": images, "dataset": "coco", "synthetic": SHAPES_WORLD})
    return path
