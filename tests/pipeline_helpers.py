"""What the pipeline tests share: running scripts/pipeline.sh on tests/fixtures/pipeline_tiny.yaml (or a variant of
it) and reading Table 1 back. Two test files use it, so that pytest-xdist's two workers each take one."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parents[1]
TINY = ROOT / "tests" / "fixtures" / "pipeline_tiny.yaml"


def env(meteor: bool = False) -> dict:
    """The pipeline's environment. METEOR is off unless asked for: these tests check orchestration (skips,
    kills, jobs, processes), and each captioner run would spend ~4 s loading METEOR's paraphrase table;
    METEOR itself is checked against pycocoevalcap in test_caption_metrics.py and runs in the COCO rehearsal."""
    bin_dir = str(Path(sys.executable).parent)  # the venv's python, as `make` puts it first on PATH
    return dict(os.environ, PATH=f"{bin_dir}:{os.environ['PATH']}", OMP_NUM_THREADS="1", PYTHONPATH=str(ROOT),
                **({} if meteor else {"CAPAWARE_METEOR": "off"}))


def pipeline(config: Path, run: Path, *args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run(["bash", "scripts/pipeline.sh", str(config), "--run", str(run), *args], cwd=ROOT,
                          env=env(), capture_output=True, text=True, **kw)


def tiny_config(tmp: Path, **changes) -> Path:
    cfg = yaml.safe_load(TINY.read_text())
    cfg.update(changes)
    path = tmp / "pipeline.yaml"
    path.write_text(yaml.safe_dump(cfg))
    return path


def table_rows(run: Path) -> list[dict]:
    """Table 1 rows without the fields that name the run folder."""
    rows = json.loads((run / "results" / "captioning" / "captioning.json").read_text())["rows"]
    keep = ("model", "features", "training", "B4", "C", "M", "R", "n_images", "decoding")
    return [{k: r.get(k) for k in keep} for r in rows]


def build_upstream(tmp: Path) -> tuple[Path, Path]:
    """data -> stage1 -> features of the tiny pipeline once (Cap features); stage-three scenarios start from copies."""
    config = tiny_config(tmp, feature_sets=["cap"])
    out = pipeline(config, tmp / "base", "--to", "features", timeout=600)
    assert out.returncode == 0, out.stdout + out.stderr
    return config, tmp / "base"


def copies(base: Path, *dests: Path) -> tuple[Path, ...]:
    """Independent copies of the finished upstream run, one per scenario."""
    for dest in dests:
        shutil.copytree(base, dest)
    return dests
