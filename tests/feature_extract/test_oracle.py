"""feature_extract.oracle: each scene's ground truth on the captioners' grid, checked against the scene files."""
import json

import numpy as np
import pytest

from capcore.errors import CapawareError
from feature_extract.h5io import open_features, read_feats_info
from feature_extract.oracle import CHANNELS, main


@pytest.fixture(scope="module")
def caption_set(tmp_path_factory):
    from capdata.synthetic import generate_captions

    root = tmp_path_factory.mktemp("captions")
    generate_captions(root, n_train=24, n_test=6, seed=3, size=64)
    return root / "dataset_coco.json"


def column(name: str) -> int:
    return CHANNELS.index(name)


@pytest.mark.parametrize("g", [4, 3])
def test_oracle_cells_hold_exactly_the_objects_of_the_scene_file(tmp_path, caption_set, g):
    out = tmp_path / "oracle.h5"
    main(["--karpathy", str(caption_set), "--out", str(out), "--att-size", str(g)])
    images = json.loads(caption_set.read_text())["images"]
    with open_features(out) as f:
        assert f.label == "Oracle" and len(f) == len(images)
        for img in images:
            att = np.asarray(f.att[f.row[img["cocoid"]]], dtype=np.float64).reshape(g, g, -1)
            fc = np.asarray(f.fc[f.row[img["cocoid"]]], dtype=np.float64)
            expect = np.zeros((g, g, len(CHANNELS)))
            edges = np.linspace(0, img["width"], g + 1)[1:-1]  # independent binning: digitize on the cell edges
            for o in img["objects"]:
                cx, cy = o["bbox"][0] + o["bbox"][2] / 2, o["bbox"][1] + o["bbox"][3] / 2
                r, c = np.digitize(cy, edges), np.digitize(cx, edges)
                for name in (f"kind:{o['colour']} {o['shape']}", f"shape:{o['shape']}", f"colour:{o['colour']}",
                             f"size:{o['size']}", "count"):
                    expect[r, c, column(name)] += 1
            np.testing.assert_array_equal(att[..., :column("x")], expect[..., :column("x")])
            assert att[..., column("count")].sum() == len(img["objects"])
            assert att[..., column(f"background:{img['attributes']['background'][0]}")].min() == 1
            assert att[..., column("y") + 1:].sum() == g * g  # one background per cell
            for o in img["objects"]:  # a lone object's cell holds its centre, in image fractions
                cx, cy = o["bbox"][0] + o["bbox"][2] / 2, o["bbox"][1] + o["bbox"][3] / 2
                r, c = np.digitize(cy, edges), np.digitize(cx, edges)
                if att[r, c, column("count")] == 1:
                    assert att[r, c, column("x")] == pytest.approx(cx / img["width"], abs=1e-6)
                    assert att[r, c, column("y")] == pytest.approx(cy / img["height"], abs=1e-6)
            # fc: the whole scene on the same channels (counts of the scene, mean centre, background)
            np.testing.assert_array_equal(fc[:column("x")], expect.reshape(g * g, -1)[:, :column("x")].sum(0))
            centres = [((o["bbox"][0] + o["bbox"][2] / 2) / img["width"],
                        (o["bbox"][1] + o["bbox"][3] / 2) / img["height"])
                       for o in img["objects"]]
            np.testing.assert_allclose(fc[[column("x"), column("y")]], np.mean(centres, 0), atol=1e-6)
            assert (fc[column(f"background:{img['attributes']['background'][0]}")] == 1
                    and fc[column("y") + 1:].sum() == 1)
    info = read_feats_info(out)  # what stage three checks before training on it
    assert info.grid == (g, g) and info.att_shape == (g * g, len(CHANNELS)) and info.valid.all()
    assert not out.with_name("oracle.h5.partial").exists()


def test_oracle_refuses_a_caption_set_without_scene_objects(tmp_path, caption_set):
    data = json.loads(caption_set.read_text())
    for img in data["images"]:
        img.pop("objects")
    bare = tmp_path / "dataset_coco.json"
    bare.write_text(json.dumps(data))
    (tmp_path / "images").symlink_to(caption_set.parent / "images")
    with pytest.raises(CapawareError, match="objects"):
        main(["--karpathy", str(bare), "--out", str(tmp_path / "o.h5")])
    assert not (tmp_path / "o.h5").exists()


def test_the_features_command_writes_the_oracle_and_refuses_a_stale_one(tmp_path, caption_set):
    from feature_extract.dump import main as features

    out = tmp_path / "feats" / "oracle.h5"
    args = ["--config", "studies/captioning/configs/captioning_features_oracle.yaml", f"images.captions={caption_set}",
            f"out={out}"]
    features(args + ["--verify"])
    with open_features(out) as f:
        assert f.label == "Oracle" and f.attrs["att_size"] == 4
    features(args)  # complete: kept
    with pytest.raises(CapawareError, match="another caption set, grid"):
        features(args + ["att_size=2"])
    features(args + ["att_size=2", "--force"])
    with open_features(out) as f:
        assert f.attrs["att_size"] == 2
