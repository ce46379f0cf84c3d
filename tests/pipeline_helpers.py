"""What the pipeline tests share: running scripts/pipeline.sh on tests/fixtures/pipeline_tiny.yaml (or a variant of
it) and reading Table 1 back. Two test files use it, so that pytest-xdist's two workers each take one."""
from __future__ import annotations

import json
import os
import re
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
    check_stage1_progress(out.stdout)
    return config, tmp / "base"


def check_stage1_progress(stdout: str) -> None:
    """Stage one said each finished row while it ran (capcore/progress.py): per study, rows 1..n in order, each
    with its nDCG, all before the stage's ``done`` line (issue #65: 6-9 minutes of silence before)."""
    lines = stdout.splitlines()
    done = next(i for i, line in enumerate(lines) if line.startswith("[stage1] done in "))
    rows = [re.match(r"^\[stage1\] (\S+): row (\d+)/(\d+) .+: nDCG@\d+ [01]\.\d{3}( \(\d+ s\))?$", line)
            for line in lines[:done]]
    seen: dict[str, list[int]] = {}
    for m in filter(None, rows):
        seen.setdefault(m[1], []).append(int(m[2]))
        assert (m[4] is None) == (m[2] == "1"), m[0]  # trained rows say how long they took; the baseline row not
    totals = {m[1]: int(m[3]) for m in filter(None, rows)}
    assert seen and all(seen[s] == list(range(1, totals[s] + 1)) for s in seen), (seen, totals)


def copies(base: Path, *dests: Path) -> tuple[Path, ...]:
    """Independent copies of the finished upstream run, one per scenario."""
    for dest in dests:
        shutil.copytree(base, dest)
    return dests


# A copy of the checkout with its configs shrunk: the commands the docs print, run as written on tiny configs
# (tests/studies/test_study_commands.py, tests/repo/test_readme_commands.py).
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


def stage1_tiny(entry: str) -> str:
    """STAGE1_TINY for a caption track; for pose and layout without the caption generator's keys."""
    if "caption" in Path(entry.split()[0]).name:  # the file's name: studies/captioning/configs/ holds others
        return STAGE1_TINY
    return " ".join(w for w in STAGE1_TINY.split() if not w.startswith(("data.synthetic.n_val=", "captions.")))


def shrink(path: Path) -> None:
    """Append the tiny overrides to every command of a pipeline config, by stage."""
    tiny = yaml.safe_load(TINY.read_text())
    cfg = yaml.safe_load(path.read_text())
    tails = {"features": tiny_tail(tiny["features"][0]), "captioners": tiny_tail(tiny["captioners"][0]),
             "rl": tiny_tail(tiny["rl"][0]), "stage1": STAGE1_TINY}
    for stage, tail in tails.items():
        cfg[stage] = [f"{entry} {stage1_tiny(entry) if stage == 'stage1' else tail}" for entry in cfg.get(stage) or []
                      ] or None
    path.write_text(yaml.safe_dump({k: v for k, v in cfg.items() if v is not None}, sort_keys=False))


def make(repo: Path, *args: str) -> subprocess.CompletedProcess:
    env = dict(os.environ, OMP_NUM_THREADS="1", CAPAWARE_METEOR="off")
    return subprocess.run(["make", f"VENV={VENV}", "-o", f"{VENV}/.installed", *args], cwd=repo, env=env,
                          capture_output=True, text=True, timeout=1500)
