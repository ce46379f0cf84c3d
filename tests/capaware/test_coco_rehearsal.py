"""A rehearsal of the real COCO layout: capdata.synthetic.coco_release writes a tree exactly as COCO and
Karpathy release it (``train2014/COCO_train2014_%012d.jpg``, ``val2014/...``, ``dataset_coco.json`` with
Karpathy's fields only) and a ResNet-101 state dict under torchvision's file name in a fresh TORCH_HOME; then
configs/paper/pipeline_coco.yaml, with its entries' paths and budgets shrunk, runs end to end on it, as
README tells a user to."""
from __future__ import annotations

import json
import os
import subprocess

import h5py
import pytest

from capdata.synthetic.coco_release import WEIGHTS, generate_coco_release
from tests.pipeline_helpers import ROOT, env

KARPATHY_FIELDS = {"filepath", "sentids", "filename", "imgid", "split", "sentences", "cocoid"}


@pytest.mark.integration  # 212 s on a 2-vCPU Intel Xeon: the paper configs' pieces are checked in make test
@pytest.mark.timeout(900)
def test_pipeline_coco_runs_end_to_end_on_the_released_layout(tmp_path):
    config = generate_coco_release(tmp_path / "rehearsal")
    coco = tmp_path / "rehearsal" / "coco"
    data = json.loads((coco / "dataset_coco.json").read_text())
    for im in data["images"]:
        assert set(im) == KARPATHY_FIELDS
        folder = "train2014" if im["split"] == "train" else "val2014"
        assert im["filepath"] == folder and im["filename"] == f"COCO_{folder}_{im['cocoid']:012d}.jpg"
        assert (coco / folder / im["filename"]).read_bytes()[:2] == b"\xff\xd8"  # JPEG, as released
    assert {im["split"] for im in data["images"]} == {"train", "restval", "val", "test"}

    e = dict(env(meteor=True), TORCH_HOME=str(tmp_path / "rehearsal" / "torch"))  # scored as a user's run is
    out = subprocess.run(["bash", "scripts/pipeline.sh", str(config)], cwd=ROOT, env=e, capture_output=True,
                         text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    run = tmp_path / "rehearsal" / "run"
    with h5py.File(run / "features" / "imagenet.h5", "r") as f:  # the hub file, found by torchvision's name
        assert f.attrs["checkpoint_sha256"] == f"imagenet:{WEIGHTS}" and f.attrs["arch"] == "resnet101"
        assert f["att"].shape[-1] == 2048 and len(f["image_id"]) == len(data["images"])
    with h5py.File(run / "features" / "cap.h5", "r") as f:  # stage one's ResNet-101, ImageNet-initialised
        assert f.attrs["backbone"] == "metric-learning" and f.attrs["arch"] == "resnet101"
    rows = json.loads((run / "results" / "captioning" / "captioning.json").read_text())["rows"]
    cells = sorted((r["model"], r["features"], r["training"]) for r in rows)
    assert cells == sorted((m, f, t) for m in ("Att2all2", "Top-Down") for f in ("Img", "Cap") for t in ("XE", "RL"))
    assert all(r["n_images"] == 8 and r["M"] is not None for r in rows)  # Karpathy's test split, METEOR included
    assert (run / "report" / "index.html").is_file()
    assert os.listdir(tmp_path / "rehearsal" / "torch" / "hub" / "checkpoints") == [WEIGHTS]  # nothing downloaded
