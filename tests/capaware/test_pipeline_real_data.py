"""The paper pipeline's data stage on small fixtures of the three real releases (issue #14).

``scripts/pipeline.sh configs/paper/pipeline_paper.yaml --to data``, its stage configs pointed at fixtures
by overrides in a copy of the pipeline config: it must pass on good fixtures and stop in one line,
naming the file, on each broken one.
"""
from __future__ import annotations

import json
import subprocess
from pathlib import Path

import fixtures_builders as fb
import numpy as np
import pytest
import scipy.io
import yaml
from tests.pipeline_helpers import env

REPO = Path(__file__).resolve().parents[2]


def fixtures(root: Path) -> dict[str, Path]:
    coco = root / "coco"
    fb.write_karpathy(coco)
    mpii = root / "mpii"
    fb.write_mpii(mpii)
    (mpii / "mpii_split.json").write_text(json.dumps(
        {"015601864.jpg": "train", "015599452.jpg": "test", "091807521.jpg": "test"}))
    lsun = fb.write_lsun(root / "lsun", types={"training": [5, 0, 5], "validation": [5, 1]}, numbering="regions")
    return {"coco": coco, "mpii": mpii, "lsun": lsun}


def paper_config(tmp: Path, data: dict[str, Path]) -> Path:
    cfg = yaml.safe_load((REPO / "configs/paper/pipeline_paper.yaml").read_text())
    points = {"mpii": f"data.root={data['mpii']} data.image_root={data['mpii'] / 'images'} eval.n_queries=null",
              "lsun": f"data.root={data['lsun']}", "coco": f"data.root={data['coco']}"}
    cfg["stage1"] = [f"{REPO / e} {points[next(k for k in points if k in e or (k == 'coco' and 'caption' in e))]}"
                     for e in cfg["stage1"]]
    for key in ("features", "captioners", "rl"):
        cfg[key] = [str(REPO / e) for e in cfg[key]]
    path = tmp / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def data_stage(config: Path, run: Path) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/pipeline.sh", str(config), "--to", "data", "--run", str(run)],
                          cwd=REPO, env=env(), capture_output=True, text=True, timeout=300)


def error_lines(run: Path) -> list[str]:
    return [line for line in (run / "logs" / "data.log").read_text().splitlines() if line.startswith("error:")]


@pytest.fixture()
def paper(tmp_path):
    data = fixtures(tmp_path / "data")
    return paper_config(tmp_path, data), data


def test_paper_data_stage_passes_on_fixtures_of_the_three_releases(paper, tmp_path):
    config, data = paper
    done = data_stage(config, tmp_path / "run")
    assert done.returncode == 0, done.stdout + done.stderr
    log = (tmp_path / "run" / "logs" / "data.log").read_text()
    assert f"{data['coco']}: 4 caption images (restval 1, test 1, train 1, val 1): every image opens" in log
    assert f"{data['mpii']}: 3 pose images (test 2, train 1): every image opens" in log
    assert f"{data['lsun']}: 3 layout images (test 1, train 2): every image opens and its layout map fits it" in log


def _broken(kind: str, data: dict[str, Path]) -> tuple[Path, str]:
    """Break one fixture; return the file the error line must name and a phrase it must hold."""
    if kind == "coco_missing_image":
        gone = data["coco"] / "val2014" / "COCO_val2014_000000000073.jpg"
        gone.unlink()
        return gone, "image not found (record 2"
    if kind == "lsun_corner_count":
        mat = data["lsun"] / "training.mat"
        arr = scipy.io.loadmat(str(mat))["training"]
        arr[0, 1]["point"] = np.ones((6, 2))  # a type-0 room with 6 corners
        scipy.io.savemat(str(mat), {"training": arr})
        return mat, "layout type 0 has 8 corners, 'point' holds 6"
    if kind == "lsun_unknown_label":
        seg = data["lsun"] / "layout_seg" / "training_000_type5.mat"
        bad = fb.region_numbering(fb.lsun_map(5))
        bad[0, 0] = 0
        scipy.io.savemat(str(seg), {"layout": bad})
        return seg, "unknown layout label 0"
    if kind == "mpii_no_test_split":
        split = data["mpii"] / "mpii_split.json"
        split.write_text(json.dumps({"015601864.jpg": "train", "015599452.jpg": "train", "091807521.jpg": "train"}))
        return Path("eval.query_split"), "split 'test' has no images"
    raise ValueError(kind)


@pytest.mark.parametrize("kind", ["coco_missing_image", "lsun_corner_count", "lsun_unknown_label",
                                  "mpii_no_test_split"])
def test_paper_data_stage_stops_in_one_line_on_each_broken_release(paper, tmp_path, kind):
    config, data = paper
    named, phrase = _broken(kind, data)
    done = data_stage(config, tmp_path / "run")
    assert done.returncode != 0
    assert "Traceback" not in (tmp_path / "run" / "logs" / "data.log").read_text()
    lines = error_lines(tmp_path / "run")
    assert len(lines) == 1 and str(named) in lines[0] and phrase in lines[0], lines
