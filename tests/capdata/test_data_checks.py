"""The data stage (``python -m capaware.stage data``) opens every file before any training.

A missing or truncated image, or an LSUN layout map whose size is not its image's, is refused in
one line naming the file and the record (index, image name), with the further problems counted.
"""
import json
from pathlib import Path

import numpy as np
import pytest
import scipy.io

import tests.fixtures_builders as fb
from capcore.errors import CapawareError, run_cli
from capdata.check_data import check_records, find_problems, image_size
from capdata.readers.karpathy import read_karpathy
from capdata.readers.lsun import read_lsun
from capaware.stage import main as stage_main


def write_config(folder: Path, data: dict) -> Path:
    path = folder / "stage1.yaml"
    path.write_text(json.dumps({"data": data}))  # JSON is YAML
    return path


def karpathy_config(tmp_path: Path, root: Path) -> Path:
    return write_config(tmp_path, {"track": "caption", "format": "karpathy", "root": str(root)})


def lsun_config(tmp_path: Path, root: Path) -> Path:
    return write_config(tmp_path, {"track": "layout", "format": "lsun", "root": str(root), "layout_type": None})


def run_prepare(config: Path, capsys) -> tuple[int, str, str]:
    """``python -m capaware.stage data CONFIG`` in-process (the CLI's code path); (code, out, err)."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: stage_main(["data", str(config)]))
        raise SystemExit(0)
    captured = capsys.readouterr()
    return exit_info.value.code, captured.out, captured.err


def error_line(code: int, err: str) -> str:
    """The one error line (a progress bar redrawn with \\r may precede it)."""
    assert code == 2, err
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    return errors[0]


def image_path(root: Path, k: int) -> Path:
    img = fb.KARPATHY_IMAGES[k]
    return root / img["filepath"] / img["filename"]


def test_good_set_prints_counts_per_split(tmp_path, capsys):
    root = tmp_path / "coco"
    fb.write_karpathy(root)
    code, out, err = run_prepare(karpathy_config(tmp_path, root), capsys)
    assert code == 0, err
    assert f"{root}: 4 caption images (restval 1, test 1, train 1, val 1): every image opens" in out


def test_missing_image_is_one_line_naming_file_and_record(tmp_path, capsys):
    root = tmp_path / "coco"
    fb.write_karpathy(root)
    missing = image_path(root, 2)
    missing.unlink()
    line = error_line(*run_prepare(karpathy_config(tmp_path, root), capsys)[::2])
    assert str(missing) in line and "image not found" in line
    assert "record 2" in line and fb.KARPATHY_IMAGES[2]["filename"] in line and "split val" in line
    assert "more" not in line  # the only problem


def test_truncated_and_corrupt_images_are_refused_first_named_rest_counted(tmp_path, capsys):
    root = tmp_path / "coco"
    fb.write_karpathy(root)
    truncated = fb.write_truncated_image(image_path(root, 1))
    fb.write_corrupt_image(image_path(root, 3))
    image_path(root, 0).unlink()
    with pytest.raises(CapawareError):  # PIL opens the truncated file: only decoding finds it
        image_size(truncated)
    line = error_line(*run_prepare(karpathy_config(tmp_path, root), capsys)[::2])
    # the first problem in record order is record 0 (missing); the other two are counted by kind
    assert str(image_path(root, 0)) in line and "record 0" in line
    assert "and 2 more: 2 images that do not open" in line
    problems = find_problems(read_karpathy(root / "dataset_coco.json"), progress=False, workers=2)
    assert [(p.index, p.kind) for p in problems] == [(0, "missing"), (1, "undecodable"), (3, "undecodable")]
    assert "truncated" in problems[1].what and problems[1].path == truncated


def test_truncated_image_alone_names_it(tmp_path, capsys):
    root = tmp_path / "coco"
    fb.write_karpathy(root)
    truncated = fb.write_truncated_image(image_path(root, 3))
    line = error_line(*run_prepare(karpathy_config(tmp_path, root), capsys)[::2])
    assert str(truncated) in line and "cannot decode image" in line and "truncated" in line
    assert "record 3" in line and fb.KARPATHY_IMAGES[3]["filename"] in line


def test_png_images_are_decoded_too(tmp_path):
    good = fb.write_image(tmp_path / "a.png", (9, 7))
    assert image_size(good) == (9, 7)
    with pytest.raises(CapawareError, match="cannot decode image"):
        image_size(fb.write_truncated_image(tmp_path / "b.png"))


def test_lsun_good_set_passes(tmp_path, capsys):
    root = fb.write_lsun(tmp_path / "lsun")
    code, out, err = run_prepare(lsun_config(tmp_path, root), capsys)
    assert code == 0, err
    assert "3 layout images (test 1, train 2): every image opens and its layout map fits it" in out


def test_lsun_layout_map_of_another_size_is_refused(tmp_path, capsys):
    root = fb.write_lsun(tmp_path / "lsun")
    entry = fb.LSUN_ENTRIES["training"][1]
    seg = root / "layout_seg" / f"{entry['image']}.mat"
    scipy.io.savemat(str(seg), {"layout": np.pad(fb.lsun_map(entry["type"]), ((0, 1), (0, 0)), mode="edge")})
    line = error_line(*run_prepare(lsun_config(tmp_path, root), capsys)[::2])  # map 31x40, resolution 30x40
    assert str(seg) in line and "31x40" in line and "resolution 30x40" in line
    assert "record 1" in line and f"{entry['image']}.jpg" in line


def test_lsun_image_of_another_size_than_its_map_is_refused(tmp_path, capsys):
    root = fb.write_lsun(tmp_path / "lsun")
    entry = fb.LSUN_ENTRIES["training"][1]
    fb.write_image(root / "images" / f"{entry['image']}.jpg", (40, 31))  # map and resolution: 30x40
    line = error_line(*run_prepare(lsun_config(tmp_path, root), capsys)[::2])
    assert str(root / "layout_seg" / f"{entry['image']}.mat") in line
    assert "layout map is 30x40 (HxW), its image 31x40" in line and "record 1" in line


def test_lsun_unreadable_map_and_missing_image_are_both_reported(tmp_path):
    root = fb.write_lsun(tmp_path / "lsun")
    first, second = fb.LSUN_ENTRIES["training"]
    (root / "layout_seg" / f"{first['image']}.mat").write_bytes(b"not a mat file")
    (root / "images" / f"{second['image']}.jpg").unlink()
    records = read_lsun(root, layout_type=None)
    problems = find_problems(records, progress=False, workers=1)
    assert [(p.index, p.kind) for p in problems] == [(0, "map_unreadable"), (1, "missing")]
    with pytest.raises(CapawareError) as err:
        check_records(records, progress=False)
    assert err.value.where == str(root / "layout_seg" / f"{first['image']}.mat")
    assert "and 1 more: 1 image missing" in err.value.problem


def test_an_image_shared_by_records_is_reported_once(tmp_path):
    root = tmp_path / "coco"
    images = [dict(fb.KARPATHY_IMAGES[0], imgid=k, cocoid=9 + k) for k in range(3)]  # one file, 3 entries
    fb.write_karpathy(root, images=images)
    fb.write_corrupt_image(image_path(root, 0))
    problems = find_problems(read_karpathy(root / "dataset_coco.json"), progress=False)
    assert [(p.index, p.kind) for p in problems] == [(0, "undecodable")]
