"""A rehearsal of the real COCO layout: capdata.synthetic.coco_release writes a tree exactly as COCO and
Karpathy release it (``train2014/COCO_train2014_%012d.jpg``, ``val2014/...``, ``dataset_coco.json`` with
Karpathy's fields only) and a ResNet-101 state dict under torchvision's file name in a fresh TORCH_HOME; then
configs/paper/pipeline_coco.yaml, with its entries' paths and budgets shrunk, runs end to end on it, as
README tells a user to."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import h5py
import pytest
import yaml

from capdata.synthetic.coco_release import WEIGHTS, generate_coco_release
from tests.pipeline_helpers import ROOT, env

KARPATHY_FIELDS = {"filepath", "sentids", "filename", "imgid", "split", "sentences", "cocoid"}


@pytest.mark.integration  # 212 s on a 2-vCPU Intel Xeon: the paper configs' pieces are checked in make test
@pytest.mark.timeout(1800)
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
    found = [r for r in rows if r["grounding_file"] and r["grounding_file"].endswith("grounding_test.json")]
    assert len(found) == 8 and all(r["D"] is not None for r in rows)  # G is None only where its ratio is 0 / 0
    assert "Captioning, Karpathy test split" in (run / "results" / "captioning" / "captioning.md").read_text()

    # Issue #58: stage three again on COCO's own files with the split file (format coco_captions), from a copy of the
    # run whose features stage is done: G and D are filled and the heading names the split, through the commands
    # the pipeline runs (a COCO-format run once recorded split None and looked for grounding_None.json).
    coco_run = tmp_path / "rehearsal" / "coco_run"
    shutil.copytree(run, coco_run)
    shutil.rmtree(coco_run / "captions")  # the vocabulary and labels were made from the Karpathy json: made again
    cfg = yaml.safe_load(config.read_text())
    switch = f"data.json={coco / 'coco_splits.json'} data.format=coco_captions"
    cfg.update(run_dir=str(coco_run), captioners=[f"{c} {switch}" for c in cfg["captioners"]],
               rl=[f"{c} {switch}" for c in cfg["rl"]])
    coco_config = tmp_path / "rehearsal" / "pipeline_coco_format.yaml"
    coco_config.write_text(yaml.safe_dump(cfg, sort_keys=False, width=1000))
    out = subprocess.run(["bash", "scripts/pipeline.sh", str(coco_config), "--from", "captioners", "--force"],
                         cwd=ROOT, env=e, capture_output=True, text=True, timeout=900)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr
    coco_rows = json.loads((coco_run / "results" / "captioning" / "captioning.json").read_text())["rows"]
    assert len(coco_rows) == 8 and all(r["caption_format"] == "coco_captions" and r["split"] == "test"
                                       for r in coco_rows)
    assert all(r["grounding_file"].endswith("grounding_test.json") and r["D"] is not None and r["n_images"] == 8
               for r in coco_rows)  # G and D read from the file beside each run (G None only for a 0 / 0 ratio)
    assert any(r["G"] is not None for r in coco_rows)
    assert "Captioning, COCO-format test split" in (coco_run / "results" / "captioning" / "captioning.md").read_text()
