"""The study commands README and docs print, run as written (`make study-trunks`, `make study-positive`) in a copy of
the checkout whose study configs are shrunk to a tiny caption set: each finishes, resumes, and writes the files
the docs point to, stamped with the declaration.

Marked ``studies``: a few minutes on 2 cores, so `make test` leaves them out and `make test-studies` (which CI
runs after it) runs them. The copy holds the tracked files only, as a fresh clone would; the shrinking is done
by appending the tiny pipeline's overrides (tests/fixtures/pipeline_tiny.yaml) to each command of the study's own
pipeline configs, so the study's configs, scripts and Makefile targets are the ones under test.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.pipeline_helpers import ROOT, TINY

pytestmark = [pytest.mark.studies, pytest.mark.timeout(1800)]
VENV = Path(sys.executable).parents[1]
STAGE1_TINY = ("data.synthetic.n_val=16 data.synthetic.n_train=64 data.synthetic.n_test=16 data.input_size=32 "
               "data.synthetic.size=64 captions.w2v_dim=16 captions.w2v_epochs=2 graph.m=6 graph.workers=1 "
               "train.positives=4 train.batch_size=12 train.k=3 train.anchors_per_batch=1 train.epochs=0.1 eval.k=5 "
               "eval.n_queries=8 model.arch=resnet10 model.embed_dim=8 pretrain.epochs=0.5 pretrain.batch_size=16 "
               "pretrain.crop=16 pretrain.data.synthetic.n_train=120 pretrain.data.synthetic.n_test=8 "
               "pretrain.data.synthetic.size=64 pretrain.precision=float32 train.precision=float32")


def tiny_tail(entry: str) -> str:
    """The tiny pipeline's overrides of one command (everything after its config file)."""
    return entry.split(" ", 1)[1].replace("\n", " ") if " " in entry else ""


def checkout(tmp: Path) -> Path:
    """The tracked files, as a fresh clone has them."""
    repo = tmp / "repo"
    files = subprocess.run(["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, text=True, check=True)
    for name in filter(None, files.stdout.split("\0")):
        (repo / name).parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(ROOT / name, repo / name)
    return repo


def shrink(path: Path) -> None:
    """Append the tiny overrides to every command of a pipeline config, by stage."""
    tiny = yaml.safe_load(TINY.read_text())
    cfg = yaml.safe_load(path.read_text())
    tails = {"features": tiny_tail(tiny["features"][0]), "captioners": tiny_tail(tiny["captioners"][0]),
             "rl": tiny_tail(tiny["rl"][0]), "stage1": STAGE1_TINY}
    for stage, tail in tails.items():
        cfg[stage] = [f"{entry} {tail}" for entry in cfg.get(stage) or []] or None
    path.write_text(yaml.safe_dump({k: v for k, v in cfg.items() if v is not None}, sort_keys=False))


def make(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", CAPAWARE_METEOR="off")
    return subprocess.run(["make", f"VENV={VENV}", "-o", f"{VENV}/.installed", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1500)


def test_make_study_trunks_runs_every_declared_trunk_and_writes_table1_over_trunks(tmp_path):
    repo = checkout(tmp_path)
    for name in ("pipeline_trunks.yaml", "pipeline_trunks_raw.yaml"):
        shrink(repo / "configs" / "study" / name)
    one = make(repo, "study-trunks", "TRUNKS=0")
    assert one.returncode == 0, one.stdout[-3000:] + one.stderr[-3000:]
    assert "trunk 1 not finished: tables over trunks wait" in one.stdout
    out = make(repo, "study-trunks")  # the other trunks, then the tables; trunk 0 resumes as finished
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = repo / "runs" / "trunks"
    result = json.loads((run / "results" / "trunks" / "table1_trunks.json").read_text())
    assert result["ran"]["trunks"] == [0, 1, 2] and len(result["primary"]) == 4
    assert result["standardised_check"] is not None and len(result["standardised_check"]["cells"]) == 4
    assert (run / "results" / "probe" / "probe.md").is_file() and (run / "t2" / "results" / "feature_scale.md").is_file()
    assert (run / "results" / "feature_scale.md").read_text().count("(trunk ") == 12
    timing = (run / "results" / "timing.txt").read_text()
    assert "trunk 0: pipeline to features" in timing and "Table 1 over trunks" in timing


def test_make_study_positive_chooses_a_recipe_and_writes_the_verdict(tmp_path):
    repo = checkout(tmp_path)
    out = make(repo, "study-positive", "EVERY=2", f"POSITIVE_ARGS={STAGE1_TINY}")
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    run = repo / "runs" / "positive"
    verdict = json.loads((run / "results" / "positive_control.json").read_text())
    assert len(verdict["real"]) == len(verdict["shuffled"]) == 3 and verdict["budget"] > 0
    kept = out.stdout.split("recipe kept on val: ")[1].split()[0]
    assert kept in ("layer4_10x", "layer4_30x") and len(list(run.glob(f"{kept}_*/s*/finished"))) == 6
    again = make(repo, "study-positive", "EVERY=2", f"POSITIVE_ARGS={STAGE1_TINY}")  # every run is finished
    assert again.returncode == 0 and "->" not in again.stdout.split("recipe kept")[1]
