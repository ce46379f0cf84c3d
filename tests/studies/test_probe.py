"""studies.probes.probe: a linear probe finds a planted linearly separable attribute, scores chance on a shuffled one,
chooses its penalty on val, and reads its targets and features from the files a run leaves."""
import json
import subprocess
from pathlib import Path

import h5py
import numpy as np
import pytest

from capcore.errors import CapawareError
from capdata.readers.karpathy import read_karpathy
from capdata.synthetic.shapes_captions import generate_captions
from feature_extract.h5io import FORMAT, create
from studies.probes.probe import L2_GRID, probed_tags, main, majority, probe_group, region, standardise


def splits(x, y, n_train=400, n_val=150):
    cut = {"train": slice(0, n_train), "val": slice(n_train, n_train + n_val), "test": slice(n_train + n_val, None)}
    return {s: x[c] for s, c in cut.items()}, {s: y[c] for s, c in cut.items()}


def one_hot(labels, n):
    return np.eye(n, dtype=np.float32)[labels]


@pytest.mark.parametrize("group", ["count", "shape"])  # one-value (arg-max) and several-value (exact set) groups
def test_a_planted_separable_attribute_is_recovered_and_a_shuffled_one_scores_chance(group):
    rng = np.random.default_rng(0)
    x = rng.normal(size=(850, 24))
    w = rng.normal(size=(24, 3))
    if group == "count":
        y = one_hot((x @ w).argmax(1), 3)
    else:
        y = (x @ w > 0).astype(np.float32)
    names = [f"{group}:{v}" for v in "abc"]
    xs, ys = splits(x, y)
    xs = standardise(xs)
    fit = probe_group(xs, ys, names)
    assert fit["test"] >= 0.9 and fit["l2"] in L2_GRID
    shuffled = splits(x, y[rng.permutation(len(y))])[1]
    chance = probe_group(xs, shuffled, names)
    floor = majority(shuffled)
    assert chance["test"] <= floor + 0.12  # no better than always answering the commonest training value
    assert fit["test"] > chance["test"] + 0.4


def test_regions_divide_the_image_in_thirds_as_the_position_captions_do():
    assert region(0, 0, 90, 90) == "top left"
    assert region(89.9, 45, 90, 90) == "middle right"
    assert region(45, 89.9, 90, 90) == "bottom centre"
    assert region(29.9, 30, 90, 90) == "middle left"


def write_fc(path, ids, fc):
    """A complete features file as stage two leaves it (h5io.create, then the rows and the complete flag)."""
    n, c = fc.shape
    attrs = {"format": FORMAT, "backbone": "class-pretrained", "backbone_method": "", "arch": "resnet18",
             "checkpoint": "x.pt", "checkpoint_sha256": "0" * 64, "input_policy": "square", "input_size": 48,
             "att_size": 1, "channels": c, "dtype": "float16", "compression": "none", "precision": "float32",
             "images_sha256": "0" * 64, "n_images": n}
    create(path, attrs, ids, [f"{i}.png" for i in ids])
    with h5py.File(path, "a") as f:
        f["fc"][...] = fc.astype(np.float16)
        f["att"][...] = fc[:, None, :].astype(np.float16)
        f.attrs.update(n_done=n, complete=True)
    return path


def test_the_command_probes_every_group_from_a_run_s_files(tmp_path):
    rec = read_karpathy(generate_captions(tmp_path / "set", n_train=80, n_val=40, n_test=40, seed=1, size=48))
    tags = probed_tags(rec)
    assert all(sum(t.startswith("background:") for t in ts) == 1 for ts in tags)
    for ts, objs in zip(tags, rec.objects):  # one position tag per distinct region, none for empty ones
        assert 1 <= sum(t.startswith("position:") for t in ts) <= len(objs)
    backgrounds = sorted({t for ts in tags for t in ts if t.startswith("background:")})
    planted = np.stack([one_hot(backgrounds.index(next(t for t in ts if t.startswith("background:"))), len(backgrounds))
                        for ts in tags]) * 3 + np.random.default_rng(0).normal(size=(len(tags), len(backgrounds)))
    order = np.random.default_rng(1).permutation(len(tags))  # rows in another order than the json: matched by id
    files = []
    for seed in range(2):
        noise = np.random.default_rng(seed).normal(scale=0.3, size=planted.shape)
        files.append(f"planted={write_fc(tmp_path / f'p{seed}.h5', rec.image_ids[order], (planted + noise)[order])}")
    files.append(f"noise="
                 f"{write_fc(tmp_path / 'n.h5', rec.image_ids, np.random.default_rng(5).normal(size=planted.shape))}")
    files.append(f"noise="
                 f"{write_fc(tmp_path / 'n2.h5', rec.image_ids, np.random.default_rng(6).normal(size=planted.shape))}")
    main(["--karpathy", str(tmp_path / "set/dataset_coco.json"), "--features", *files, "--paired", "planted=noise",
          "--out", str(tmp_path / "out")])
    result = json.loads((tmp_path / "out/probe.json").read_text())
    assert (list(result["rows"]) == ["planted", "noise"]
            and len(result["rows"]["planted"]) == 2 == len(result["rows"]["noise"]))
    assert all(r["groups"]["background"]["test"] >= 0.9 for r in result["rows"]["planted"])
    assert all(r["groups"]["background"]["test"] < 0.6 for r in result["rows"]["noise"])
    assert result["n"] == {"train": 80, "val": 40, "test": 40}
    table = (tmp_path / "out/probe.md").read_text()
    assert "| planted | 2 |" in table and "±" in table and "| majority (floor) |" in table
    paired = next(line for line in table.splitlines() if line.startswith("| planted − noise (paired) | 2 |"))
    diff = [r["groups"]["background"]["test"] for r in result["rows"]["planted"]]
    diff = [d - r["groups"]["background"]["test"] for d, r in zip(diff, result["rows"]["noise"])]
    assert f"{np.mean(diff):+.3f}" in paired and "(2/2)" in paired  # background: planted ahead on both seeds
    with pytest.raises(CapawareError, match="same number of files"):
        main(["--karpathy", str(tmp_path / "set/dataset_coco.json"), "--features", files[0],
              "--paired", "planted=noise",
              "--out", str(tmp_path / "out2")])


def test_a_caption_set_without_attributes_and_a_bad_features_argument_are_one_line_errors(tmp_path):
    rec = read_karpathy(generate_captions(tmp_path / "set", n_train=8, n_test=2, seed=1, size=32))
    rec.attributes = None
    with pytest.raises(CapawareError, match="attributes"):
        probed_tags(rec)
    with pytest.raises(CapawareError, match="NAME=FILE"):
        main(["--karpathy", str(tmp_path / "set/dataset_coco.json"), "--features", "img.h5", "--out", str(tmp_path)])


def test_probe_seeds_script_refuses_bad_arguments_in_one_line(tmp_path):
    script = Path(__file__).resolve().parents[2] / "studies/probes/probe_seeds.sh"
    run = subprocess.run(["bash", str(script), str(tmp_path), "0"], capture_output=True, text=True)
    assert run.returncode == 2 and "dataset_coco.json is missing" in run.stderr and len(run.stderr.splitlines()) == 1
    run = subprocess.run(["bash", str(script), str(tmp_path), "one"], capture_output=True, text=True)
    assert run.returncode == 2 and "seed 'one' is not a whole number" in run.stderr
