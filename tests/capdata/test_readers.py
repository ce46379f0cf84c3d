"""Real-format readers on tiny fixtures written in the releases' own structures.

Parsed values are checked against what the fixture wrote; every bad input must give one
CapawareError line that names the file.
"""
from __future__ import annotations

import json
from pathlib import Path

import fixtures_builders as fb
import numpy as np
import pytest
import scipy.io

from capcore.errors import CapawareError
from capdata.images import check_images_exist, load_rgb
from capdata.readers import (
    LSUN_TO_OURS,
    load_layout_map,
    read_karpathy,
    read_lsun,
    read_mpii,
    read_mpii_json,
    read_pose_json,
)
from capdata.readers.lsun import record_layout_map
from capdata.readers.lsun_types import corner_count, is_region_numbering
from capdata.records import LAYOUT_SURFACES, select


def raises_naming(path: Path, *words: str):
    """Context: a CapawareError whose one-line message names ``path`` and contains ``words``."""
    class _Check:
        def __enter__(self):
            self.ctx = pytest.raises(CapawareError)
            self.info = self.ctx.__enter__()
            return self.info

        def __exit__(self, *exc):
            handled = self.ctx.__exit__(*exc)
            msg = str(self.info.value)
            assert "\n" not in msg, msg
            assert str(Path(path).resolve()) in msg or str(path) in msg, msg
            for w in words:
                assert w in msg, (w, msg)
            return handled
    return _Check()


# ------------------------------------------------------------------------------------- Karpathy


def test_karpathy_values(tmp_path):
    path = fb.write_karpathy(tmp_path)
    rec = read_karpathy(path)
    assert len(rec) == len(fb.KARPATHY_IMAGES)
    for i, img in enumerate(fb.KARPATHY_IMAGES):
        assert rec.image_paths[i] == tmp_path.resolve() / img["filepath"] / img["filename"]
        assert rec.splits[i] == img["split"]
        assert rec.image_ids[i] == img["cocoid"]
        assert rec.captions[i] == [s["tokens"] for s in img["sentences"]]
        assert rec.raw[i] == [s["raw"] for s in img["sentences"]]
    assert rec.image_ids.dtype == np.int64
    assert rec.categories is None  # the real COCO file has none
    check_images_exist(rec)
    test_only = select(rec, rec.splits == "test")
    assert list(test_only.image_ids) == [74]


def test_karpathy_categories_and_image_root(tmp_path):
    path = fb.write_karpathy(tmp_path / "ann", with_categories=True, write_images=False)
    rec = read_karpathy(path, image_root=tmp_path / "imgs")
    assert rec.categories == [img["categories"] for img in fb.KARPATHY_IMAGES]
    assert rec.image_paths[0] == (tmp_path / "imgs").resolve() / "train2014" / fb.KARPATHY_IMAGES[0]["filename"]
    # categories on only some images -> dropped, not half-filled
    imgs = json.loads(json.dumps(fb.KARPATHY_IMAGES))
    del imgs[1]["categories"]
    assert read_karpathy(fb.write_karpathy(tmp_path / "b", True, False, images=imgs)).categories is None


def test_karpathy_missing_file(tmp_path):
    with raises_naming(tmp_path / "nope.json", "not found"):
        read_karpathy(tmp_path / "nope.json")


def test_karpathy_malformed_json(tmp_path):
    path = tmp_path / "dataset_coco.json"
    path.write_text('{"images": [{"filename": "a.jpg",')
    with raises_naming(path, "not valid JSON"):
        read_karpathy(path)


def test_karpathy_missing_images_key(tmp_path):
    path = tmp_path / "dataset_coco.json"
    path.write_text(json.dumps({"annotations": []}))
    with raises_naming(path, "'images'"):
        read_karpathy(path)


def test_karpathy_missing_required_field(tmp_path):
    imgs = json.loads(json.dumps(fb.KARPATHY_IMAGES))
    del imgs[2]["split"]
    path = fb.write_karpathy(tmp_path, images=imgs, write_images=False)
    with raises_naming(path, "image 2", "COCO_val2014_000000000073.jpg", "'split'"):
        read_karpathy(path)


def test_karpathy_image_with_no_sentences(tmp_path):
    imgs = json.loads(json.dumps(fb.KARPATHY_IMAGES))
    imgs[1]["sentences"] = []
    path = fb.write_karpathy(tmp_path, images=imgs, write_images=False)
    with raises_naming(path, "image 1", "COCO_val2014_000000000042.jpg", "no sentences"):
        read_karpathy(path)


def test_karpathy_sentence_without_tokens(tmp_path):
    imgs = json.loads(json.dumps(fb.KARPATHY_IMAGES))
    del imgs[2]["sentences"][1]["tokens"]
    path = fb.write_karpathy(tmp_path, images=imgs, write_images=False)
    with raises_naming(path, "image 2", "sentence 1 has no tokens"):
        read_karpathy(path)


def test_karpathy_unknown_split(tmp_path):
    imgs = json.loads(json.dumps(fb.KARPATHY_IMAGES))
    imgs[3]["split"] = "testing"
    path = fb.write_karpathy(tmp_path, images=imgs, write_images=False)
    with raises_naming(path, "image 3", "unknown split 'testing'"):
        read_karpathy(path)


def test_check_images_exist_names_first_missing(tmp_path):
    rec = read_karpathy(fb.write_karpathy(tmp_path))
    rec.image_paths[2].unlink()
    rec.image_paths[3].unlink()
    with raises_naming(rec.image_paths[2], "image not found", "entry 2"):
        check_images_exist(rec)


# ------------------------------------------------------------------------------------ pose json


def test_pose_json_values(tmp_path):
    path = fb.write_pose_json(tmp_path)
    rec = read_pose_json(path)
    assert len(rec) == 3
    assert rec.image_paths == [tmp_path.resolve() / img["file"] for img in fb.POSE_IMAGES]
    assert list(rec.splits) == ["train", "val", "test"]
    np.testing.assert_allclose(rec.joints, np.array([img["joints"] for img in fb.POSE_IMAGES]))
    np.testing.assert_array_equal(rec.visible, np.array([img["visible"] for img in fb.POSE_IMAGES], bool))
    # default crop: the whole image squared around its centre; the third image has its own box
    np.testing.assert_allclose(rec.boxes, [[0, -8, 64, 56], [-10, 0, 50, 60], [1, 2, 41, 42]])
    assert rec.joints.dtype == np.float32 and rec.boxes.dtype == np.float32 and rec.visible.dtype == bool
    check_images_exist(rec)


def _pose_file(tmp_path, mutate) -> Path:
    imgs = json.loads(json.dumps(fb.POSE_IMAGES))
    mutate(imgs)
    return fb.write_pose_json(tmp_path, images=imgs, write_images=False)


def test_pose_json_wrong_joint_count(tmp_path):
    path = _pose_file(tmp_path, lambda imgs: imgs[1]["joints"].pop())
    with raises_naming(path, "image 1", "img/p1.png", "has 15 joints, expected 16"):
        read_pose_json(path)


def test_pose_json_visible_length_mismatch(tmp_path):
    path = _pose_file(tmp_path, lambda imgs: imgs[0]["visible"].append(1))
    with raises_naming(path, "image 0", "'visible' has 17 entries, expected 16"):
        read_pose_json(path)


def test_pose_json_non_numeric_coordinate(tmp_path):
    def mutate(imgs):
        imgs[2]["joints"][4] = ["12", 3.0]
    path = _pose_file(tmp_path, mutate)
    with raises_naming(path, "image 2", "not a pair of finite numbers"):
        read_pose_json(path)


def test_pose_json_missing_key(tmp_path):
    path = _pose_file(tmp_path, lambda imgs: imgs[0].pop("width"))
    with raises_naming(path, "image 0", "'width'"):
        read_pose_json(path)
    path = _pose_file(tmp_path, lambda imgs: imgs[2].pop("visible"))
    with raises_naming(path, "image 2", "'visible'"):
        read_pose_json(path)


def test_pose_json_unknown_split(tmp_path):
    path = _pose_file(tmp_path, lambda imgs: imgs[0].update(split="training"))
    with raises_naming(path, "unknown split 'training'"):
        read_pose_json(path)


def test_pose_json_malformed_and_missing(tmp_path):
    path = tmp_path / "poses.json"
    path.write_text("{'images': []}")  # single quotes: not JSON
    with raises_naming(path, "not valid JSON"):
        read_pose_json(path)
    with raises_naming(tmp_path / "absent.json", "not found"):
        read_pose_json(tmp_path / "absent.json")


# ------------------------------------------------------------------------------------ MPII .mat


def _expected_person(key: str, visibility: str = "annotated", box_scale: float = 1.25):
    """What the reader must produce for a fixture person, derived from MPII_PEOPLE by hand."""
    spec = fb.MPII_PEOPLE[key]
    joints = np.zeros((16, 2), np.float32)
    vis = np.zeros(16, bool)
    for jid, x, y, v in spec["points"]:
        joints[jid] = (x - 1, y - 1)
        vis[jid] = True if visibility == "annotated" else (v in (1, "1"))
    cx, cy = spec["objpos"][0] - 1, spec["objpos"][1] - 1
    half = box_scale * 200 * spec["scale"] / 2
    return joints, vis, np.array([cx - half, cy - half, cx + half, cy + half], np.float32)


def test_mpii_values(tmp_path):
    mat, image_root = fb.write_mpii(tmp_path)
    rec = read_mpii(mat, image_root)
    assert len(rec) == len(fb.MPII_EXPECTED_ORDER) == 3
    for i, key in enumerate(fb.MPII_EXPECTED_ORDER):
        joints, vis, box = _expected_person(key)
        assert rec.image_paths[i] == image_root.resolve() / fb.MPII_PEOPLE[key]["image"]
        np.testing.assert_allclose(rec.joints[i], joints)
        np.testing.assert_array_equal(rec.visible[i], vis)
        np.testing.assert_allclose(rec.boxes[i], box, rtol=1e-6)
    assert list(rec.splits) == ["train"] * 3  # the test image has no joints: no record
    # person A: ankles (0, 5) absent -> invisible; person C: only the head top
    assert not rec.visible[0, [0, 5]].any() and rec.visible[0].sum() == 14
    assert rec.visible[2].tolist() == [j == 9 for j in range(16)]
    # A's box: centre (300, 250), side 1.25 * 200 * 2.0 = 500
    np.testing.assert_allclose(rec.boxes[0], [50, 0, 550, 500])
    check_images_exist(rec)


def test_mpii_is_visible_flag_and_box_scale(tmp_path):
    mat, image_root = fb.write_mpii(tmp_path, write_images=False)
    rec = read_mpii(mat, image_root, visibility="is_visible", box_scale=1.0)
    for i, key in enumerate(fb.MPII_EXPECTED_ORDER):
        joints, vis, box = _expected_person(key, "is_visible", 1.0)
        np.testing.assert_array_equal(rec.visible[i], vis)
        np.testing.assert_allclose(rec.boxes[i], box, rtol=1e-6)
    # '1', 1 visible; '0', 0, [] and a missing field are not
    assert rec.visible[0].tolist() == [False, True, False, True, False, False, False, True, True, True,
                                       False, False, True, True, False, True]
    assert not rec.visible[2].any()


def test_mpii_split_file_and_filters(tmp_path):
    mat, image_root = fb.write_mpii(tmp_path, write_images=False)
    split_file = tmp_path / "thin_slicing_split.txt"
    split_file.write_text("# name split\n015599452.jpg test\n091807521.jpg train\n060111501.jpg test\n")
    rec = read_mpii(mat, image_root, split_file=split_file)  # image 1 (person A) is not listed
    assert [p.name for p in rec.image_paths] == ["015599452.jpg", "091807521.jpg"]
    assert list(rec.splits) == ["test", "train"]
    only_test = read_mpii(mat, image_root, split="test", split_file=split_file)
    assert len(only_test) == 1 and only_test.splits[0] == "test"
    json_split = tmp_path / "split.json"
    json_split.write_text(json.dumps({"015601864.jpg": "val"}))
    assert list(read_mpii(mat, image_root, split_file=json_split).splits) == ["val"]
    single = read_mpii(mat, image_root, single_person_only=True)
    assert len(single) == 3  # A, B and C are each their image's single_person entry
    with raises_naming(mat, "no annotated person", "MPII test images carry no joints"):
        read_mpii(mat, image_root, split="test")


def test_mpii_bad_split_file(tmp_path):
    mat, image_root = fb.write_mpii(tmp_path, write_images=False)
    split_file = tmp_path / "split.txt"
    split_file.write_text("015599452.jpg holdout\n")
    with raises_naming(split_file, "unknown split 'holdout'"):
        read_mpii(mat, image_root, split_file=split_file)


def test_mpii_malformed_mat(tmp_path):
    junk = fb.write_corrupt_image(tmp_path / "mpii_human_pose_v1_u12_1.mat")
    with raises_naming(junk, "cannot read .mat file"):
        read_mpii(junk, tmp_path)
    other = tmp_path / "other.mat"
    scipy.io.savemat(str(other), {"annolist": np.zeros(3)})
    with raises_naming(other, "no variable RELEASE", "annolist"):
        read_mpii(other, tmp_path)
    no_train = tmp_path / "no_train.mat"
    scipy.io.savemat(str(no_train), {"RELEASE": {"annolist": np.zeros(2)}})
    with raises_naming(no_train, "no field 'img_train'"):
        read_mpii(no_train, tmp_path)
    with raises_naming(tmp_path / "absent.mat", "not found"):
        read_mpii(tmp_path / "absent.mat", tmp_path)


def test_mpii_joint_id_out_of_range(tmp_path, monkeypatch):
    people = json.loads(json.dumps(fb.MPII_PEOPLE))
    people["C"]["points"] = [[16, 410.0, 35.0, "absent"]]
    monkeypatch.setattr(fb, "MPII_PEOPLE", people)
    mat, image_root = fb.write_mpii(tmp_path, write_images=False)
    with raises_naming(mat, "091807521.jpg", "joint id 16 outside 0..15"):
        read_mpii(mat, image_root)


# ------------------------------------------------------------------------------------ LSUN .mat


def test_lsun_values(tmp_path):
    root = fb.write_lsun(tmp_path)
    rec = read_lsun(root)
    entries = [(e, "train") for e in fb.LSUN_ENTRIES["training"]] + \
              [(e, "test") for e in fb.LSUN_ENTRIES["validation"]]
    assert len(rec) == 3
    for i, (e, split) in enumerate(entries):
        assert rec.image_paths[i] == root.resolve() / "images" / f"{e['image']}.jpg"
        assert rec.seg_paths[i] == root.resolve() / "layout_seg" / f"{e['image']}.mat"
        assert rec.splits[i] == split
        assert rec.layout_types[i] == e["type"]
    check_images_exist(rec)
    type5 = read_lsun(root, layout_type=5)
    assert list(type5.layout_types) == [5, 5] and list(type5.splits) == ["train", "test"]


def test_lsun_label_mapping_is_the_documented_one():
    # LSUN surface ids: 1 frontal, 2 left, 3 right, 4 floor, 5 ceiling
    names = {lsun: LAYOUT_SURFACES[ours] for lsun, ours in LSUN_TO_OURS.items()}
    assert names == {1: "front", 2: "left", 3: "right", 4: "floor", 5: "ceiling"}


def test_load_layout_map_mat_and_png(tmp_path):
    root = fb.write_lsun(tmp_path)
    rec = read_lsun(root)
    for seg_path, layout_type in zip(rec.seg_paths, rec.layout_types):
        ours = load_layout_map(seg_path)
        lsun = fb.lsun_map(int(layout_type))
        assert ours.dtype == np.uint8 and ours.shape == lsun.shape
        expected = np.vectorize(LSUN_TO_OURS.get)(lsun)
        np.testing.assert_array_equal(ours, expected)
    # type 5 room: ceiling on top (ours 0), floor at the bottom (1), left (2) and right (4) walls
    ours = load_layout_map(rec.seg_paths[0])
    assert ours[0, 0] == 0 and ours[-1, -1] == 1 and ours[15, 0] == 2 and ours[15, -1] == 4
    png = fb.write_layout_png(tmp_path / "seg.png", ours)
    np.testing.assert_array_equal(load_layout_map(png), ours)


def test_load_layout_map_unknown_label(tmp_path):
    seg = fb.lsun_map(5)
    seg[2, 3] = 7
    path = tmp_path / "layout_seg" / "bad.mat"
    path.parent.mkdir()
    scipy.io.savemat(str(path), {"layout": seg})
    with raises_naming(path, "unknown surface label 7", "data.layout_labels=regions"):
        load_layout_map(path)
    png = fb.write_layout_png(tmp_path / "bad.png", np.full((4, 4), 9))
    with raises_naming(png, "unknown layout label 9"):
        load_layout_map(png)


def test_load_layout_map_bad_files(tmp_path):
    with raises_naming(tmp_path / "gone.mat", "not found"):
        load_layout_map(tmp_path / "gone.mat")
    with raises_naming(tmp_path / "gone.png", "not found"):
        load_layout_map(tmp_path / "gone.png")
    corrupt = fb.write_corrupt_image(tmp_path / "corrupt.png")
    with raises_naming(corrupt, "cannot decode layout PNG"):
        load_layout_map(corrupt)
    junk = fb.write_corrupt_image(tmp_path / "junk.mat")
    with raises_naming(junk, "cannot read .mat file"):
        load_layout_map(junk)
    novar = tmp_path / "novar.mat"
    scipy.io.savemat(str(novar), {"seg": fb.lsun_map(5)})
    with raises_naming(novar, "no variable 'layout'", "seg"):
        load_layout_map(novar)


def test_lsun_malformed_split_files(tmp_path):
    with raises_naming(tmp_path, "neither training.mat nor validation.mat"):
        read_lsun(tmp_path)
    scipy.io.savemat(str(tmp_path / "training.mat"), {"validation": np.zeros(2)})
    with raises_naming(tmp_path / "training.mat", "no variable 'training'"):
        read_lsun(tmp_path)
    scipy.io.savemat(str(tmp_path / "training.mat"), {"training": {"scene": "bedroom", "type": 5.0}})
    with raises_naming(tmp_path / "training.mat", "entry 1", "no 'image'"):
        read_lsun(tmp_path)


def _ours(surface_ids: np.ndarray) -> np.ndarray:
    """Surface-relabelled ids -> ours, through the documented table (independent of the reader)."""
    return np.vectorize({1: 3, 2: 2, 3: 4, 4: 1, 5: 0}.get)(surface_ids).astype(np.uint8)


ROOM_TYPES = sorted(fb.ROOMS)  # 0, 1, 5, 6, 10


def test_original_region_numbered_maps_become_the_right_surfaces_pixel_for_pixel(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": ROOM_TYPES}, numbering="regions")
    for labels in ("regions", "auto"):
        rec = read_lsun(root, layout_type=None, labels=labels)
        assert list(rec.layout_types) == ROOM_TYPES
        for i, t in enumerate(ROOM_TYPES):
            truth = fb.lsun_map(t)
            regions = scipy.io.loadmat(rec.seg_paths[i])["layout"]
            assert (regions != truth).any(), "the numbering differs from the surfaces: the test means something"
            np.testing.assert_array_equal(record_layout_map(rec, i), _ours(truth), err_msg=f"type {t}, {labels}")


def test_relabelled_maps_are_read_unchanged(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": ROOM_TYPES}, numbering="surfaces")
    for labels in ("surfaces", "auto"):
        rec = read_lsun(root, layout_type=None, labels=labels)
        for i, t in enumerate(ROOM_TYPES):
            np.testing.assert_array_equal(record_layout_map(rec, i), _ours(fb.lsun_map(t)))


def test_corners_are_read_zero_based_with_the_resolution(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": [5]})
    rec = read_lsun(root)
    np.testing.assert_array_equal(rec.corners[0], np.array(fb.ROOMS[5][0], dtype=float))
    assert rec.resolutions.tolist() == [[30, 40]] and rec.map_labels == "auto"


def _rewrite_entry(root: Path, **fields) -> Path:
    """training.mat with its first entry's fields replaced (the others as written)."""
    mat = root / "training.mat"
    arr = scipy.io.loadmat(str(mat))["training"]
    for key, value in fields.items():
        arr[0, 0][key] = value
    scipy.io.savemat(str(mat), {"training": arr})
    return mat


def test_wrong_corner_count_is_refused_in_one_line(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": [5, 0]})
    mat = _rewrite_entry(root, point=fb.lsun_corners(5)[:4])
    with raises_naming(mat, "entry 1 (training_000_type5)", "layout type 5 has 6 corners, 'point' holds 4"):
        read_lsun(root, layout_type=0)  # checked even where the entry is not kept


def test_bad_resolution_and_type_are_refused(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": [5]})
    mat = _rewrite_entry(root, resolution=np.array([[30.0]]))
    with raises_naming(mat, "entry 1 (training_000_type5)", "'resolution'"):
        read_lsun(root)
    mat = _rewrite_entry(root, resolution=np.array([[30.0, 40.0]]), type=11.0)
    with raises_naming(mat, "entry 1 (training_000_type5)", "no layout 'type' in 0..10"):
        read_lsun(root)


def test_map_of_another_size_than_the_resolution_is_refused(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": [5]})
    seg = root / "layout_seg" / "training_000_type5.mat"
    scipy.io.savemat(str(seg), {"layout": fb.lsun_map(5)[:, :39]})
    rec = read_lsun(root)
    with raises_naming(seg, "image training_000_type5.jpg", "30x39", "resolution 30x40"):
        record_layout_map(rec, 0)


def test_maps_that_fit_neither_numbering_are_refused(tmp_path):
    root = fb.write_lsun(tmp_path, types={"training": [5]})
    seg = root / "layout_seg" / "training_000_type5.mat"
    swapped = fb.lsun_map(5)
    swapped = np.where(swapped == 2, 3, np.where(swapped == 3, 2, swapped))  # left and right walls swapped
    scipy.io.savemat(str(seg), {"layout": swapped})
    with raises_naming(seg, "image training_000_type5.jpg", "neither the surfaces", "2->right"):
        record_layout_map(read_lsun(root), 0)
    assert record_layout_map(read_lsun(root, labels="surfaces"), 0)[15, 0] == 4  # the user said so: read as is
    # a region that the corners split between two surfaces (the left and right walls merged into one)
    merged = fb.region_numbering(np.where(fb.lsun_map(5) == 3, 2, fb.lsun_map(5)))
    scipy.io.savemat(str(seg), {"layout": merged})
    with raises_naming(seg, "cannot name the regions", "is split between"):
        record_layout_map(read_lsun(root, labels="regions"), 0)


def test_unknown_layout_labels_value_is_refused(tmp_path):
    root = fb.write_lsun(tmp_path)
    with raises_naming("data.layout_labels", "unknown value 'original'"):
        read_lsun(root, labels="original")


def test_region_numbering_detection():
    for t in ROOM_TYPES:
        assert is_region_numbering(fb.region_numbering(fb.lsun_map(t)))
        assert not is_region_numbering(fb.lsun_map(t))
    assert {corner_count(t) for t in (0,)} == {8} and [corner_count(t) for t in (1, 2, 5)] == [6, 6, 6]
    assert [corner_count(t) for t in (3, 4, 6, 7)] == [4] * 4 and [corner_count(t) for t in (8, 9, 10)] == [2] * 3


# --------------------------------------------------------------------------------------- images


def test_load_rgb(tmp_path):
    path = fb.write_image(tmp_path / "a.png", (7, 5), (10, 20, 30))
    img = load_rgb(path)
    assert img.mode == "RGB" and img.size == (7, 5) and img.getpixel((3, 2)) == (10, 20, 30)
    grey = tmp_path / "g.png"
    fb.write_layout_png(grey, np.full((3, 3), 4))
    assert load_rgb(grey).mode == "RGB"


def test_load_rgb_missing_image(tmp_path):
    with raises_naming(tmp_path / "missing.jpg", "image not found", "annotation file"):
        load_rgb(tmp_path / "missing.jpg")


def test_load_rgb_unreadable_image(tmp_path):
    path = fb.write_corrupt_image(tmp_path / "random.png")
    with raises_naming(path, "cannot decode image", "annotation file"):
        load_rgb(path)


def test_pose_json_measures_the_image_when_width_and_height_are_absent(tmp_path):
    fb.write_pose_json(tmp_path, write_images=True)  # p0.png is 64 x 48, p1.png 40 x 60
    full = read_pose_json(tmp_path / "poses.json")
    imgs = json.loads(json.dumps(fb.POSE_IMAGES))
    for img in imgs[:2]:
        del img["width"], img["height"]
    path = fb.write_pose_json(tmp_path, images=imgs, write_images=False, name="measured.json")
    measured = read_pose_json(path)
    assert np.array_equal(measured.boxes, full.boxes)  # the same default crops, sizes read from the PNGs
    (tmp_path / "img" / "p1.png").unlink()
    with raises_naming(path, "image 1", "img/p1.png", "cannot be opened to measure it"):
        read_pose_json(path)


def test_pose_json_measured_size_equals_explicit_size(tmp_path):
    imgs = json.loads(json.dumps(fb.POSE_IMAGES))
    imgs[0]["file"] = "img/p0.jpg"  # a JPEG too: only its header is read
    explicit = read_pose_json(fb.write_pose_json(tmp_path, images=imgs))  # writes W x H images
    for img in imgs:
        img.pop("width"), img.pop("height")
    measured = read_pose_json(fb.write_pose_json(tmp_path, images=imgs, write_images=False, name="m.json"))
    assert measured.image_paths == explicit.image_paths
    assert list(measured.splits) == list(explicit.splits)
    for field in ("joints", "visible", "boxes"):
        assert np.array_equal(getattr(measured, field), getattr(explicit, field)), field


def test_pose_json_without_size_refuses_an_unreadable_image(tmp_path):
    imgs = json.loads(json.dumps(fb.POSE_IMAGES[:2]))
    del imgs[1]["width"], imgs[1]["height"]
    path = fb.write_pose_json(tmp_path, images=imgs, write_images=False)
    with raises_naming(path, "image 1", "img/p1.png", "image not found", "give width and height"):
        read_pose_json(path)
    fb.write_corrupt_image(tmp_path / "img" / "p1.png")
    with raises_naming(path, "image 1", "img/p1.png", "not a known image format"):
        read_pose_json(path)


# ------------------------------------------------------------------------------ MPII JSON (annot/)


def _assert_same_records(a, b):
    assert a.image_paths == b.image_paths
    assert list(a.splits) == list(b.splits)
    for field in ("joints", "visible", "boxes"):
        x, y = getattr(a, field), getattr(b, field)
        assert x.dtype == y.dtype and np.array_equal(x, y), (field, x, y)


def _mat_with_split(tmp_path):
    mat, image_root = fb.write_mpii(tmp_path)
    split_file = tmp_path / "split.json"
    split_file.write_text(json.dumps(fb.MPII_JSON_SPLIT_FILE))
    return mat, image_root, split_file


def test_mpii_json_equals_mat(tmp_path):
    mat, image_root, split_file = _mat_with_split(tmp_path)
    annot, json_root = fb.write_mpii_json(tmp_path)
    assert json_root == image_root
    from_mat = read_mpii(mat, image_root, split_file=split_file)
    from_json = read_mpii_json(annot, image_root)
    assert [p.name for p in from_json.image_paths] == [fb.MPII_PEOPLE[k]["image"] for k in "ABC"]
    assert list(from_json.splits) == ["train", "train", "val"]
    _assert_same_records(from_json, from_mat)
    # A: ankles absent -> invisible at (0, 0); joints and box 0-based like the .mat reader's
    assert not from_json.visible[0, [0, 5]].any() and not from_json.joints[0, [0, 5]].any()
    np.testing.assert_array_equal(from_json.boxes[0], [50, 0, 550, 500])
    for split in ("train", "val"):
        _assert_same_records(read_mpii_json(annot, image_root, split=split),
                             read_mpii(mat, image_root, split=split, split_file=split_file))
    _assert_same_records(read_mpii_json(annot, image_root, box_scale=1.0),
                         read_mpii(mat, image_root, split_file=split_file, box_scale=1.0))
    check_images_exist(from_json)


def test_mpii_json_skips_what_the_mat_reader_skips(tmp_path):
    mat, image_root, split_file = _mat_with_split(tmp_path)
    no_joints = fb.mpii_json_entry("D")  # person D: head box only, annopoints = [] in the .mat
    assert not any(no_joints["joints_vis"])
    no_crop = {**fb.mpii_json_entry("B"), "center": [-1.0, -1.0]}
    annot, _ = fb.write_mpii_json(tmp_path, {"train.json": ["A", "B", no_joints, no_crop], "valid.json": ["C"]})
    _assert_same_records(read_mpii_json(annot, image_root), read_mpii(mat, image_root, split_file=split_file))


def test_mpii_json_valid_without_train(tmp_path):
    mat, image_root, split_file = _mat_with_split(tmp_path)
    annot, _ = fb.write_mpii_json(tmp_path, {"valid.json": ["C"]}, write_images=False)
    rec = read_mpii_json(annot, image_root)
    assert list(rec.splits) == ["val"]
    _assert_same_records(rec, read_mpii(mat, image_root, split="val", split_file=split_file))
    with raises_naming(annot, "no annotated person in split 'train'", "valid.json"):
        read_mpii_json(annot, image_root, split="train")


def test_mpii_json_through_the_data_config(tmp_path):
    from capdata.config import DataConfig
    from capdata.formats import read_records

    fb.write_mpii(tmp_path)
    annot, image_root = fb.write_mpii_json(tmp_path)
    data = DataConfig(track="pose", format="mpii_json", root=str(tmp_path))  # default: root/annot, root/images
    _assert_same_records(read_records(data), read_mpii_json(annot, image_root))


def test_mpii_json_missing_annotation_folder(tmp_path):
    absent = tmp_path / "annot"
    with raises_naming(absent, "folder not found", "train.json", "data.annotation"):
        read_mpii_json(absent, tmp_path / "images")
    absent.mkdir()
    (absent / "trainval.json").write_text("[]")
    with raises_naming(absent, "neither train.json nor valid.json", "data.annotation"):
        read_mpii_json(absent, tmp_path / "images")
    annot, image_root = fb.write_mpii_json(tmp_path / "b", write_images=False)
    with raises_naming(annot / "train.json", "is a file", "folder"):
        read_mpii_json(annot / "train.json", image_root)


def _mpii_json_file(tmp_path, mutate, name: str = "train.json"):
    entries = [fb.mpii_json_entry(k) for k in fb.MPII_JSON_FILES[name]]
    mutate(entries)
    annot, image_root = fb.write_mpii_json(tmp_path, {name: entries}, write_images=False)
    return annot / name, image_root


def test_mpii_json_wrong_joint_count(tmp_path):
    path, image_root = _mpii_json_file(tmp_path, lambda e: e[1]["joints"].pop())
    with raises_naming(path, "entry 1 (015599452.jpg)", "has 15 joints, expected 16"):
        read_mpii_json(path.parent, image_root)


def test_mpii_json_bad_joints_vis(tmp_path):
    def mutate(entries):
        entries[0]["joints_vis"][3] = 2
    path, image_root = _mpii_json_file(tmp_path, mutate)
    with raises_naming(path, "entry 0 (015601864.jpg)", "'joints_vis' entries must be 0 or 1, got 2"):
        read_mpii_json(path.parent, image_root)
    path, image_root = _mpii_json_file(tmp_path / "v", lambda e: e[0]["joints_vis"].append(1), "valid.json")
    with raises_naming(path, "entry 0 (091807521.jpg)", "'joints_vis' has 17 entries"):
        read_mpii_json(path.parent, image_root)


def test_mpii_json_malformed_entries(tmp_path):
    def non_numeric(entries):
        entries[1]["joints"][4] = ["51", 68.25]
    cases = [
        (non_numeric, "entry 1 (015599452.jpg)", "not a pair of finite numbers"),
        (lambda e: e[0].pop("center"), "entry 0 (015601864.jpg)", "missing required field 'center'"),
        (lambda e: e[1].update(scale="big"), "entry 1", "scale 'big' is not a number"),
        (lambda e: e[0]["joints_vis"].__setitem__(0, "1"), "entry 0", "must be 0 or 1, got '1'"),
        (lambda e: e.append(["015601864.jpg"]), "entry 2 (?)", "entry is not an object"),
    ]
    for k, (mutate, *words) in enumerate(cases):
        path, image_root = _mpii_json_file(tmp_path / str(k), mutate)
        with raises_naming(path, *words):
            read_mpii_json(path.parent, image_root)
    annot = tmp_path / "dict" / "annot"
    annot.mkdir(parents=True)
    (annot / "valid.json").write_text(json.dumps({"images": []}))
    with raises_naming(annot / "valid.json", "not a list of person entries"):
        read_mpii_json(annot, tmp_path)
    (annot / "valid.json").write_text('[{"image": "a.jpg",')
    with raises_naming(annot / "valid.json", "not valid JSON"):
        read_mpii_json(annot, tmp_path)
