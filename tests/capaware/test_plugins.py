"""A new loss and a new dataset format are each one file plus one registration line (issue #38), and a user's
own loss and captioner core run from a folder outside the package through ``capaware run`` (issue #48).

The toy loss and the toy reader live in tests/toy_plugins/; the first test registers them, one line each,
and runs a whole stage-one study on them: the config check accepts their names, the study reads the
CSV through ``capdata.formats`` and trains and evaluates a row with the toy loss. The last test writes a loss
and a core, each one file with its registration inside, beside a pipeline config that names them under
``plugins:``, and runs the tiny pipeline on them as a user would: from capaware installed with ``pip install .``
(not editable) into a venv of its own, in a folder outside the checkout that holds the user's configs.
"""
import csv
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from capdata import formats
from capdata.formats import Format, register_format
from embedder.config import load_config
from embedder.losses import registry
from embedder.losses.registry import register_loss
from embedder.retrieval_report import load_rows
from embedder.rows import run_study
from tests.toy_plugins.toy_loss import DistanceRegressionLoss
from tests.toy_plugins.toy_reader import read_pose_csv


@pytest.fixture
def registries():
    """The two tables as they were, after the test (its registrations are its own)."""
    saved = dict(formats.FORMATS), dict(registry.LOSSES)
    yield
    for table, old in zip((formats.FORMATS, registry.LOSSES), saved):
        table.clear()
        table.update(old)


def write_pose_csv(root):
    """The embedded-default poses, rewritten as the toy CSV beside their images."""
    from capdata.synthetic import generate_poses

    generate_poses(root, n_train=40, n_test=8, seed=0, size=32)
    entries = json.loads((root / "poses.json").read_text())["images"]
    with open(root / "poses.csv", "w", newline="") as f:
        for e in entries:
            csv.writer(f).writerow([e["file"], e["split"], e["width"], e["height"], *np.ravel(e["joints"])])
    (root / "poses.json").unlink()  # nothing but the CSV describes the set
    return len(entries)


def tiny(tmp_path, extra):
    return load_config("configs/demo/demo_pose.yaml", [
        f"data.root={tmp_path / 'poses'}", f"out_dir={tmp_path / 'run'}", "data.input_size=32", "data.synthetic=null",
        "train.batch_size=16", "train.k=3", "train.anchors_per_batch=2", "train.epochs=0.3", "graph.m=8",
        "train.positives=4", "eval.k=5", "model.embed_dim=8", *extra])


def test_a_toy_loss_and_a_toy_reader_run_through_stage_one(tmp_path, registries):
    n = write_pose_csv(tmp_path / "poses")
    register_format("pose_csv", Format("pose", "poses.csv", read_pose_csv))
    register_loss("distance_regression", "tests.toy_plugins.toy_loss:DistanceRegressionLoss", normalised=False,
                  mined=False, args={"power": 1.0})
    cfg = tiny(tmp_path, ["data.format=pose_csv", "methods=[{name: toy, loss: distance_regression, "
                          "loss_args: {power: 0.5}}]"])
    DistanceRegressionLoss.calls = 0
    ret_dir = run_study(cfg, progress=False)
    rows = load_rows(ret_dir)
    assert list(rows) == ["Oracle", "Untrained", "toy"]
    assert DistanceRegressionLoss.calls == 6  # ceil(0.3 epochs x 20 steps per epoch): every step used the toy loss
    items = json.loads((ret_dir / "items.json").read_text())
    assert len(items["image_paths"]) <= n and all(p.endswith(".png") for p in items["image_paths"])
    assert all(0 < v <= 1 + 1e-9 for v in rows["toy"]["ndcg"])


def test_unregistered_names_stop_at_the_config_with_their_fix(tmp_path, registries):
    for extra, key in ((["data.format=pose_csv"], "data.format"),
                       (["methods=[{name: toy, loss: distance_regression}]"], "methods[0].loss")):
        with pytest.raises(Exception) as err:
            tiny(tmp_path, extra)
        assert key in str(err.value) and "use one of" in str(err.value)
    register_loss("distance_regression", "tests.toy_plugins.toy_loss:DistanceRegressionLoss", normalised=False,
                  mined=False, args={"power": 1.0})
    with pytest.raises(Exception) as err:
        tiny(tmp_path, ["methods=[{name: toy, loss: distance_regression, loss_args: {pwoer: 2.0}}]"])
    assert "methods[0].loss_args.pwoer" in str(err.value) and "use one of power" in str(err.value)


TOY_LOSS = """
import torch

from embedder.losses.base import LossBatch, RowLoss
from embedder.losses.registry import register_loss


class OutsideLoss(RowLoss):
    \"\"\"The toy loss of tests/toy_plugins/toy_loss.py, self-contained: distances regressed onto labels.\"\"\"

    def __init__(self, method, args, train):
        super().__init__(method, args, train)
        self.power = float(args["power"])

    def forward(self, batch: LossBatch) -> torch.Tensor:
        with open(__file__ + ".calls", "a") as f:  # the stage-one process says it used this file
            f.write("1")
        diff = batch.emb[batch.anchors.to(batch.emb.device)][:, None] - batch.emb[None]
        dist = (diff.pow(2).sum(-1) + 1e-12).sqrt()
        target = batch.label_dist.to(dist.device) ** self.power
        return ((dist / dist.mean() - target / target.mean().clamp_min(1e-12)) ** 2).mean()


register_loss("outside_regression", f"{__name__}:OutsideLoss", normalised=False, mined=False, args={"power": 1.0})
"""


TOY_CORE = """
from captioners.core_registry import register_core
from captioners.cores import TopDownCore


class OutsideCore(TopDownCore):
    def forward(self, xt, enc, state):
        self.steps = getattr(self, "steps", 0) + 1
        if self.steps == 1:
            with open(__file__ + ".calls", "a") as f:  # each process that builds and runs it, once
                f.write("1")
        return super().forward(xt, enc, state)


register_core("outside_core", f"{__name__}:OutsideCore", display="Outside core")
"""


TOY_FORMAT = """
from pathlib import Path

import numpy as np

from capdata.formats import Format, register_format
from capdata.records import CaptionRecords


def read_caption_tsv(source):
    \"\"\"image id, split, image file (relative to the tsv), caption: one caption a line.\"\"\"
    rows = [line.split("\\t") for line in Path(source.annotation).read_text().splitlines() if line]
    with open(str(source.annotation) + ".calls", "a") as f:  # each process that read it through the table
        f.write("1")
    order = list(dict.fromkeys((int(i), split, name) for i, split, name, _ in rows))
    caps = {}
    for i, _, _, caption in rows:
        caps.setdefault(int(i), []).append(caption)
    return CaptionRecords(image_paths=[Path(source.annotation).parent / name for _, _, name in order],
                          splits=np.array([split for _, split, _ in order]),
                          image_ids=np.array([i for i, _, _ in order], dtype=np.int64),
                          captions=[[c.split() for c in caps[i]] for i, _, _ in order],
                          raw=[caps[i] for i, _, _ in order])


register_format("caption_tsv", Format("caption", "captions.tsv", read_caption_tsv, ("train", "restval")))
"""


def write_caption_tsv(folder):
    """The tiny pipeline's caption set, generated as its data stage would, then rewritten as the toy TSV."""
    from capdata.synthetic import generate_captions

    json_path = generate_captions(folder, n_train=64, n_test=16, seed=0, size=64)
    lines = [f"{im['cocoid']}\t{im['split']}\t{im['filepath']}/{im['filename']}\t{' '.join(s['tokens'])}"
             for im in json.loads(json_path.read_text())["images"] for s in im["sentences"]]
    json_path.unlink()  # nothing but the TSV describes the set
    (folder / "captions.tsv").write_text("\n".join(lines) + "\n")
    return folder / "captions.tsv"


def plain_install(venv: Path) -> Path:
    """capaware installed from the checkout with ``pip install .`` (not editable) into a new venv, which reuses
    the test venv's dependencies (a .pth line naming its site-packages; an editable capaware there is not
    seen: .pth files in a folder named by a .pth line are not read). Returns the venv's ``capaware`` command."""
    import shutil
    import site
    import sysconfig
    import tomllib

    from tests.pipeline_helpers import ROOT

    source = venv.parent / "source"  # a copy: building in the checkout would write build/ and egg-info there
    source.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    setuptools_find = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]["packages"]["find"]
    for package in (pattern.rstrip("*") for pattern in setuptools_find["include"]):
        shutil.copytree(ROOT / package, source / package, ignore=shutil.ignore_patterns("__pycache__"))
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    python = venv / "bin" / "python"
    purelib = subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                             check=True, capture_output=True, text=True).stdout.strip()
    deps = [p for p in site.getsitepackages() + [sysconfig.get_paths()["purelib"]] if Path(p).is_dir()]
    (Path(purelib) / "test_venv_dependencies.pth").write_text("\n".join(dict.fromkeys(deps)) + "\n")
    build = ["--no-build-isolation"] if _has("setuptools") else []  # the test venv's setuptools builds it
    subprocess.run([sys.executable, "-m", "pip", "--python", str(python), "install", "-q", "--no-deps", *build,
                    str(source)], check=True, capture_output=True)
    return venv / "bin" / "capaware"


def _has(module: str) -> bool:
    import importlib.util

    return importlib.util.find_spec(module) is not None


@pytest.mark.studies  # in `make test-studies`: 144 s alone on the 2-vCPU Intel Xeon (model 207), over 300 s in CI
@pytest.mark.timeout(900)  # beside the README test on the other core
def test_a_loss_a_format_and_a_core_from_outside_run_through_capaware_run_from_a_plain_install(tmp_path):
    import shutil

    import yaml

    from tests.pipeline_helpers import ROOT, TINY, env, table_rows

    capaware = plain_install(tmp_path / "venv")
    project = tmp_path / "project"  # the user's folder: their configs, outside the checkout
    shutil.copytree(ROOT / "configs" / "demo", project / "configs" / "demo")
    user_env = {k: v for k, v in env().items() if k != "PYTHONPATH"}
    where = subprocess.run([str(capaware.with_name("python")), "-c", "import capaware, embedder; "
                            "print(capaware.__file__); print(embedder.__file__)"],
                           cwd=project, env=user_env, capture_output=True, text=True, check=True).stdout.split()
    assert all(str(tmp_path / "venv") in w and str(ROOT) not in w for w in where), where
    outside = tmp_path / "my_plugins"
    outside.mkdir()
    (outside / "my_loss.py").write_text(TOY_LOSS)
    (outside / "my_core.py").write_text(TOY_CORE)
    (outside / "my_format.py").write_text(TOY_FORMAT)
    tsv = write_caption_tsv(tmp_path / "tsv_set")
    cfg = yaml.safe_load(TINY.read_text())
    cfg["stage1"] = [cfg["stage1"][0].replace("loss: log_ratio, mining: dense", "loss: outside_regression, "
                                              "loss_args: {power: 0.5}")
                     + f" data.synthetic=null data.root={tsv.parent} data.format=caption_tsv model.init=none"]
    assert "outside_regression" in cfg["stage1"][0]  # no class pretraining: it needs the synthetic scenes' boxes
    cfg["features"] = [e + f" images.captions={tsv} images.format=caption_tsv" for e in cfg["features"]
                       if "features_cap" in e]
    cfg.update(captioners=[cfg["captioners"][0] + f" model.core=outside_core data.json={tsv} data.format=caption_tsv"
                           " train.epochs=1"],
               rl=[], report=False, feature_sets=["cap"],
               plugins=["my_loss.py", "my_core.py", "my_format.py"])  # files beside the config
    config = outside / "pipeline.yaml"
    config.write_text(yaml.safe_dump(cfg))
    out = subprocess.run([str(capaware), "run", str(config), "--run", str(tmp_path / "run")],
                         cwd=project, env=user_env, capture_output=True, text=True, timeout=600)
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    assert (outside / "my_loss.py.calls").read_text()  # stage one trained with the outside loss
    assert len((outside / "my_core.py.calls").read_text()) >= 2  # XE trained it, the scores stage decoded with it
    assert len(Path(str(tsv) + ".calls").read_text()) >= 4  # data, stage one, features, prepro and scores read it
    rows = table_rows(tmp_path / "run")
    assert [(r["model"], r["features"], r["training"]) for r in rows] == [("Outside core", "Cap", "XE")]
    assert rows[0]["C"] is not None and rows[0]["n_images"] > 0
