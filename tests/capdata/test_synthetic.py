"""The embedded-default generators: determinism, real file structure, and properties of the labels."""
from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io
from PIL import Image

from capcore.errors import CapawareError
from capdata.records import MPII_JOINTS
from capdata.synthetic import (
    generate_captions,
    generate_poses,
    generate_rooms,
    item_rng,
)
from capdata.synthetic import poses as P
from capdata.synthetic import rooms as R
from capdata.synthetic import shapes_captions as C

N_TRAIN, N_TEST = 16, 4
GENERATORS = {"poses": generate_poses, "rooms": generate_rooms, "captions": generate_captions}


def _generate(kind: str, out: Path, seed: int) -> Path:
    if kind == "captions":
        return generate_captions(out, n_train=N_TRAIN, n_test=N_TEST, seed=seed, n_val=3)
    return GENERATORS[kind](out, n_train=N_TRAIN, n_test=N_TEST, seed=seed)


@pytest.fixture(scope="module")
def made(tmp_path_factory):
    """Each kind generated twice with seed 0 and once with seed 1."""
    out = {}
    for kind in GENERATORS:
        for tag, seed in (("a", 0), ("b", 0), ("other", 1)):
            root = tmp_path_factory.mktemp(f"{kind}_{tag}")
            out[kind, tag] = (root, _generate(kind, root, seed))
    return out


def _files(root: Path) -> dict[str, bytes]:
    return {str(p.relative_to(root)): p.read_bytes() for p in sorted(root.rglob("*")) if p.is_file()}


# ------------------------------------------------------------------------------------ determinism
@pytest.mark.parametrize("kind", list(GENERATORS))
def test_same_seed_gives_identical_bytes_and_another_seed_differs(made, kind):
    (root_a, ann_a), (root_b, _), (root_o, ann_o) = made[kind, "a"], made[kind, "b"], made[kind, "other"]
    files_a, files_b, files_o = _files(root_a), _files(root_b), _files(root_o)
    assert files_a == files_b
    assert not any(name.endswith(".tmp") or "/." in name or name.startswith(".") for name in files_a)
    assert set(files_a) == set(files_o)
    assert ann_a.read_bytes() != ann_o.read_bytes()
    images = [n for n in files_a if n.startswith("images/")]
    assert len(images) >= N_TRAIN + N_TEST
    assert sum(files_a[n] != files_o[n] for n in images) == len(images)


def test_a_failed_run_leaves_no_annotation_and_no_temporary_files(tmp_path, monkeypatch):
    calls = {"n": 0}
    real = P.save_image

    def flaky(img, path, **kw):
        calls["n"] += 1
        if calls["n"] == 5:
            raise KeyboardInterrupt
        real(img, path, **kw)

    monkeypatch.setattr(P, "save_image", flaky)
    with pytest.raises(KeyboardInterrupt):
        generate_poses(tmp_path, n_train=8, n_test=0)
    names = sorted(p.name for p in tmp_path.rglob("*") if p.is_file())
    assert names == [f"{i:06d}.png" for i in range(4)]


def test_bad_arguments_raise_one_line_errors(tmp_path):
    with pytest.raises(CapawareError, match="n_train"):
        generate_poses(tmp_path, n_train=0)
    with pytest.raises(CapawareError, match="size"):
        generate_rooms(tmp_path, size=4)
    with pytest.raises(CapawareError, match="seed"):
        generate_captions(tmp_path, seed=-1)


def test_cli_writes_a_dataset(tmp_path, capsys):
    from capdata.synthetic.__main__ import main

    main(["poses", "--out", str(tmp_path), "--n-train", "2", "--n-test", "1", "--size", "32"])
    data = json.loads((tmp_path / "poses.json").read_text())
    assert [r["split"] for r in data["images"]] == ["train", "train", "test"]
    assert Image.open(tmp_path / data["images"][0]["file"]).size == (32, 32)
    assert "poses.json" in capsys.readouterr().out


# ------------------------------------------------------------------------------------------ poses
def test_pose_json_structure(made):
    root, path = made["poses", "a"]
    data = json.loads(path.read_text())
    assert data["joint_names"] == list(MPII_JOINTS)
    assert [r["split"] for r in data["images"]] == ["train"] * N_TRAIN + ["test"] * N_TEST
    n_hidden = 0
    for rec in data["images"]:
        img = Image.open(root / rec["file"])
        assert img.mode == "RGB" and img.size == (rec["width"], rec["height"]) == (64, 64)
        joints, visible = np.array(rec["joints"]), np.array(rec["visible"])
        assert joints.shape == (16, 2) and visible.shape == (16,)
        assert set(visible.tolist()) <= {0, 1}
        inside = ((joints >= 0) & (joints <= 63)).all(axis=1)
        assert inside[visible == 1].all()
        n_hidden += int((visible == 0).sum())
        assert np.allclose(joints, np.round(joints, 2))
    assert n_hidden < 0.25 * 16 * len(data["images"])  # most joints are visible


def test_pose_bones_are_rigid_and_scaled():
    """3-D bones have exactly the person's lengths times the pixel unit; projection only shortens them."""
    lo, hi = P.SCALE_RANGE
    for i in range(200):
        pose = P.sample_pose(item_rng(0, "poses", i), 64)
        unit = pose["unit"]
        assert lo * P.UNIT_FRACTION * 64 - 1e-9 <= unit <= hi * P.UNIT_FRACTION * 64 + 1e-9
        for a, b, name in P.BONES:
            ia, ib = P.J[a], P.J[b]
            length_3d = np.linalg.norm(pose["joints_3d"][ia] - pose["joints_3d"][ib])
            assert length_3d == pytest.approx(unit * pose["lengths"][name], rel=1e-9)
            length_2d = np.linalg.norm(pose["joints"][ia] - pose["joints"][ib])
            # image = in-plane rotation + shift of the 3-D x, y: it keeps the x-y length exactly
            xy = np.linalg.norm(pose["joints_3d"][ia, :2] - pose["joints_3d"][ib, :2])
            assert length_2d == pytest.approx(xy, abs=1e-9)
            assert length_2d <= length_3d + 1e-9
        low, high = np.array(P.LIMITS["elbow"]), np.array(P.LIMITS["knee"])
        angles = pose["angles"]
        assert low[0] <= angles[P.P["l_elbow"]] <= low[1] and high[0] <= angles[P.P["r_knee"]] <= high[1]


def test_pose_labels_vary_with_articulation_more_than_placement(made):
    """Bone lengths in the json stay under the largest person; figures sit near the centre; poses are
    graded (nearest-neighbour distances spread out, not a few tight clusters)."""
    data = json.loads(made["poses", "a"][1].read_text())
    joints = np.array([r["joints"] for r in data["images"]])
    bound = P.SCALE_RANGE[1] * P.UNIT_FRACTION * 64 * P.LENGTH_JITTER[1]
    for a, b, name in P.BONES:
        lengths = np.linalg.norm(joints[:, P.J[a]] - joints[:, P.J[b]], axis=1)
        assert (lengths <= bound * P.BONE_LENGTHS[name] + 0.02).all()
    centres = (joints.min(axis=1) + joints.max(axis=1)) / 2
    assert np.abs(centres - 31.5).max() < 0.08 * 64 + 6  # jitter plus the head margin
    poses = np.array([P.sample_pose(item_rng(3, "poses", i), 64)["joints"] for i in range(300)])
    poses -= poses.mean(axis=1, keepdims=True)  # remove placement
    dist = np.linalg.norm(poses[:, None] - poses[None], axis=-1).sum(-1)
    np.fill_diagonal(dist, np.inf)
    nearest = dist.min(axis=1)
    assert nearest.min() > 0 and np.percentile(nearest, 90) > 1.5 * np.percentile(nearest, 10)


# ------------------------------------------------------------------------------------------ rooms
def _split_file(root: Path, name: str):
    mat = scipy.io.loadmat(root / f"{name}.mat", squeeze_me=True, struct_as_record=False)
    assert [k for k in mat if not k.startswith("__")] == [name]
    return np.atleast_1d(mat[name])


def test_rooms_in_lsun_release_structure(made):
    root, path = made["rooms", "a"]
    assert path == root / "training.mat"
    raw = scipy.io.loadmat(root / "training.mat")["training"]
    assert raw.shape == (1, N_TRAIN) and raw.dtype.names == ("image", "scene", "type", "point", "resolution")
    assert raw[0, 0]["type"].dtype == np.uint8 and raw[0, 0]["image"].dtype.kind == "U"
    assert len(_split_file(root, "validation")) == N_TEST
    assert (root / "training.mat").read_bytes()[:116] == R.MAT_HEADER
    for entry in _split_file(root, "training"):
        assert int(entry.type) == 5
        assert entry.scene in R.SCENES
        assert entry.point.shape == (6, 2) and list(entry.resolution) == [64, 64]
        img = Image.open(root / "images" / f"{entry.image}.jpg")
        assert img.format == "JPEG" and img.mode == "RGB" and img.size == (64, 64)
        seg_file = root / "layout_seg" / f"{entry.image}.mat"
        assert seg_file.read_bytes()[:116] == R.MAT_HEADER
        seg = scipy.io.loadmat(seg_file)["layout"]
        assert seg.dtype == np.uint8 and seg.shape == (64, 64)
        assert set(np.unique(seg).tolist()) == set(R.TYPE5_IDS)
        assert min((seg == k).mean() for k in R.TYPE5_IDS) >= R.MIN_SURFACE_FRACTION


def test_room_readers_accept_the_files(made):
    from capdata.readers.lsun import load_layout_map, read_lsun

    root, _ = made["rooms", "a"]
    records = read_lsun(root, layout_type=5)
    assert len(records) == N_TRAIN + N_TEST and set(records.splits.tolist()) == {"train", "test"}
    assert set(np.unique(load_layout_map(records.seg_paths[0])).tolist()) == {0, 1, 2, 4}  # no front wall


def test_room_keypoints_agree_with_the_layout_map(made):
    """Corner 1 touches ceiling and both walls, corner 4 floor and both walls; the left wall lies left
    of the right wall; corners move continuously across images."""
    root, _ = made["rooms", "a"]
    corners = []
    for entry in _split_file(root, "training"):
        seg = scipy.io.loadmat(root / "layout_seg" / f"{entry.image}.mat")["layout"]
        pts = entry.point - 1.0  # the release's 1-based corners -> 0-based pixel centres
        for k, want in ((0, {2, 3, 5}), (3, {2, 3, 4})):
            x, y = np.rint(pts[k]).astype(int)
            window = seg[max(y - 2, 0):y + 3, max(x - 2, 0):x + 3]
            assert want <= set(np.unique(window).tolist())
        assert pts[0, 1] < pts[3, 1]  # ceiling corner above floor corner
        assert pts[1, 0] < pts[0, 0] < pts[2, 0] and pts[4, 0] < pts[3, 0] < pts[5, 0]
        cols = np.arange(64)[None, :].repeat(64, 0)
        assert cols[seg == 2].mean() < cols[seg == 3].mean()
        corners.append(pts[[0, 3]].ravel())
    corners = np.array(corners)
    assert (corners.std(axis=0) > 2).all() and len(np.unique(np.round(corners), axis=0)) == len(corners)


def test_room_distractors_do_not_change_the_map():
    rng_a, rng_b = item_rng(0, "rooms", 7), item_rng(0, "rooms", 7)
    _, seg, _ = R.render_room(rng_a, 64)
    cam, seg_again = R.sample_camera(rng_b, 64)
    assert np.array_equal(seg, seg_again) and np.array_equal(seg, R.layout_map(cam, 64))


# --------------------------------------------------------------------------------------- captions
_CANON = {w: s for s, pairs in C.SHAPE_WORDS.items() for pair in pairs for w in pair}
_COLOUR = {w: c for c, words in C.COLOUR_WORDS.items() for w in words}
_SIZE = {w: s for s, words in C.SIZE_WORDS.items() for w in words}
_GENERIC = {w for pair in C.GENERIC_NOUNS for w in pair}
_COUNTS = ((["a", "pair", "of"], 2), (["a", "single"], 1), (["one"], 1), (["two"], 2), (["three"], 3),
           (["four"], 4))


def _noun_filter(tokens: list[str], i: int):
    """Parse '[size] [colour] noun' at i: (filter over objects, next index) or None."""
    size = _SIZE.get(tokens[i]) if i < len(tokens) else None
    i += size is not None
    colour = _COLOUR.get(tokens[i]) if i < len(tokens) else None
    i += colour is not None
    two = " ".join(tokens[i:i + 2])
    if len(tokens[i:i + 2]) == 2 and two in _CANON:
        shape, i = _CANON[two], i + 2
    elif i < len(tokens) and tokens[i] in _CANON:
        shape, i = _CANON[tokens[i]], i + 1
    elif i < len(tokens) and tokens[i] in _GENERIC:
        shape, i = None, i + 1
    else:
        return None

    def match(o):
        return ((size is None or o["size"] == size) and (colour is None or o["colour"] == colour)
                and (shape is None or o["shape"] == shape))
    return match, i


def _count_claims(tokens: list[str]):
    for i in range(len(tokens)):
        for phrase, n in _COUNTS:
            if tokens[i:i + len(phrase)] == phrase:
                parsed = _noun_filter(tokens, i + len(phrase))
                if parsed:
                    yield n, parsed[0]
                break


_RELATIONS = {"to the left of": lambda a, b: a["x"] < b["x"], "to the right of": lambda a, b: a["x"] > b["x"],
              "above": lambda a, b: a["y"] < b["y"], "below": lambda a, b: a["y"] > b["y"],
              "next to": lambda a, b: True, "beside": lambda a, b: True}


def _relation_claim(tokens: list[str]):
    """(filter a, relation, filter b) for captions of the form '[there is] a NP REL a|another NP'."""
    if tokens[:2] == ["there", "is"]:
        tokens = tokens[2:]
    if not tokens or tokens[0] not in ("a", "an"):
        return None
    first = _noun_filter(tokens, 1)
    if not first:
        return None
    rest = " ".join(tokens[first[1]:])
    for rel in _RELATIONS:
        if rest.startswith(rel + " "):
            tail = rest[len(rel) + 1:].split()
            if tail and tail[0] in ("a", "an", "another"):
                second = _noun_filter(tail, 1)
                if second and second[1] == len(tail):
                    return first[0], rel, second[0]
    return None


def test_caption_file_structure(made):
    root, path = made["captions", "a"]
    data = json.loads(path.read_text())
    assert data["dataset"] == "coco"
    want = C.split_sizes(N_TRAIN, 3, N_TEST)
    splits = [img["split"] for img in data["images"]]
    assert {s: splits.count(s) for s in want} == want and want["restval"] > 0
    sentids = []
    for i, img in enumerate(data["images"]):
        assert img["imgid"] == i and img["cocoid"] == 100000 + i and img["filepath"] == "images"
        assert Image.open(root / img["filepath"] / img["filename"]).size == (128, 128)
        assert len(img["sentences"]) == 5 and img["sentids"] == [s["sentid"] for s in img["sentences"]]
        assert img["categories"] == sorted(set(img["categories"])) and set(img["categories"]) <= set(C.SHAPES)
        mentioned = set()
        for s in img["sentences"]:
            assert s["imgid"] == i and s["tokens"]
            assert all(t.isalpha() and t == t.lower() for t in s["tokens"])
            assert s["raw"][0].isupper() and s["raw"].endswith(".")
            assert s["raw"][:-1].replace(",", "").lower().split() == s["tokens"]
            toks = s["tokens"]
            mentioned |= {_CANON[w] for w in toks if w in _CANON}
            mentioned |= {_CANON[" ".join(toks[k:k + 2])] for k in range(len(toks) - 1)
                          if " ".join(toks[k:k + 2]) in _CANON}
        assert len({" ".join(s["tokens"]) for s in img["sentences"]}) == 5
        assert mentioned <= set(img["categories"])
        sentids += img["sentids"]
    assert len(set(sentids)) == len(sentids)


def test_captions_are_true_of_their_scenes():
    """Explicit counts equal the matching objects; relations and background words hold; not every
    caption names every object."""
    n_counts = n_relations = n_partial = 0
    for i in range(300):
        rng = item_rng(5, "captions", i)
        scene = C.sample_scene(rng, 128)
        objs = scene["objects"]
        assert 1 <= len(objs) <= 4
        for a in objs:  # placed without overlap, inside the frame
            assert a["r"] <= a["x"] <= 128 - a["r"] and a["r"] <= a["y"] <= 128 - a["r"]
            for b in objs:
                if a is not b:
                    assert np.hypot(a["x"] - b["x"], a["y"] - b["y"]) > a["r"] + b["r"]
        captions = C.make_captions(rng, scene, 128)
        assert len(captions) == 5
        for tokens, _ in captions:
            for n, match in _count_claims(tokens):
                assert n == sum(map(match, objs)), (tokens, objs)
                n_counts += 1
            claim = _relation_claim(tokens)
            if claim:
                fa, rel, fb = claim
                assert any(fa(a) and fb(b) and _RELATIONS[rel](a, b) for a in objs for b in objs if a is not b)
                n_relations += 1
            if "background" in tokens:
                word = tokens[tokens.index("background") - 1]
                assert word in C.BACKGROUND_WORDS[scene["background"]]
            shapes_named = {_CANON[t] for t in tokens if t in _CANON} | ({"cross"} if "plus" in tokens else set())
            n_partial += len(shapes_named) < len({o["shape"] for o in objs})
    assert n_counts > 500 and n_relations > 50 and n_partial > 100


def test_caption_word_vectors_cover_every_content_word_and_separate_meanings(made):
    """vectors.txt loads as word2vec text; every caption word has a vector or is a filler; synonyms sit
    closer than two colours, which sit closer than a colour and a shape (what Word2Vec on the templated
    captions could not learn: it put red and blue at cosine .93)."""
    from capdata.synthetic import word_vectors as V
    from embedder.labels.wordvecs import load_vectors

    root, path = made["captions", "a"]
    kv = load_vectors(root / C.VECTORS_FILE)
    assert kv.vector_size == V.DIM and (root / C.VECTORS_FILE).read_bytes() == (made["captions", "other"][0]
                                                                                / C.VECTORS_FILE).read_bytes()
    words = {t for img in json.loads(path.read_text())["images"] for s in img["sentences"] for t in s["tokens"]}
    assert words - V.FILLERS <= set(kv.index_to_key) and not V.FILLERS & set(kv.index_to_key)
    meaning = {w: (kind, m) for kind, ms in V.vocabulary().items() for m, ws in ms.items() for w in ws}

    def cos(a, b):
        u, v = kv[a], kv[b]
        return float(u @ v / np.linalg.norm(u) / np.linalg.norm(v))

    for a, b in (("purple", "violet"), ("circle", "discs"), ("big", "large"), ("two", "pair")):
        assert meaning[a] == meaning[b] and cos(a, b) > 0.8
    pairs = [(a, b) for a in meaning for b in meaning if a < b]
    same_kind = [cos(a, b) for a, b in pairs if meaning[a][0] == meaning[b][0] and meaning[a] != meaning[b]]
    other_kind = [cos(a, b) for a, b in pairs if meaning[a][0] != meaning[b][0]]
    assert 0.35 < np.mean(same_kind) < 0.65 and abs(np.mean(other_kind)) < 0.1
    for a, b, c in (("red", "blue", "circle"), ("circle", "square", "red"), ("left", "right", "two")):
        assert cos(a, b) > cos(a, c)


def test_attribute_embedding_of_the_label_ceiling_probe(made):
    """studies/caption_labels/caption_label_ceiling.py: one column per (group, value); equal rows for equal attribute
    sets."""
    from studies.caption_labels.caption_label_ceiling import attribute_vectors

    images = json.loads(made["captions", "a"][1].read_text())["images"]
    attrs = [img["attributes"] for img in images]
    x = attribute_vectors(attrs, ("shape", "colour"))
    n_values = len({("s", v) for a in attrs for v in a["shape"]} | {("c", v) for a in attrs for v in a["colour"]})
    assert x.shape == (len(attrs), n_values)
    assert np.array_equal(x.sum(1), [len(a["shape"]) + len(a["colour"]) for a in attrs])
    for i in range(len(attrs)):
        for j in range(len(attrs)):
            same = ({g: set(attrs[i][g]) for g in ("shape", "colour")}
                    == {g: set(attrs[j][g]) for g in ("shape", "colour")})
            assert np.array_equal(x[i], x[j]) == same


def test_unlabeled_images_come_from_the_same_world_and_move_no_captioned_image(tmp_path):
    """The unlabeled pool of self-retrieval SCST (issue #66): images without captions in unlabeled/, ids from their
    names (as stage two's images.folder reads them), scenes of their own generators: the captioned set is the same
    file for file with or without them, and stage two can read the folder."""
    plain = C.generate_captions(tmp_path / "plain", n_train=6, n_test=2, seed=4, size=32)
    pooled = C.generate_captions(tmp_path / "pooled", n_train=6, n_test=2, seed=4, size=32, n_unlabeled=3)
    assert plain.read_bytes() == pooled.read_bytes()
    for image in sorted((tmp_path / "plain" / "images").iterdir()):
        assert image.read_bytes() == (tmp_path / "pooled" / "images" / image.name).read_bytes()
    names = sorted(p.name for p in (tmp_path / "pooled" / "unlabeled").iterdir())
    assert names == ["200000.png", "200001.png", "200002.png"] and not (tmp_path / "plain" / "unlabeled").exists()
    pixels = [np.asarray(Image.open(tmp_path / "pooled" / "unlabeled" / n)) for n in names]
    assert pixels[0].shape == (32, 32, 3) and not np.array_equal(pixels[0], pixels[1])
    captioned = [np.asarray(Image.open(p)) for p in sorted((tmp_path / "pooled" / "images").iterdir())]
    assert not any(np.array_equal(u, c) for u in pixels for c in captioned)  # new scenes, not copies
    from feature_extract.sources import folder_ids

    assert folder_ids(sorted((tmp_path / "pooled" / "unlabeled").iterdir())).tolist() == [200000, 200001, 200002]
