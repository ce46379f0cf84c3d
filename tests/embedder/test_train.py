"""Stage-one training end to end on a tiny synthetic config: resume and one-line CLI errors.

The resume tests call ``embedder.train.main`` in the test's process (a run in a subprocess spent most of its
6 s importing torch; issue #55); the one-line errors go through the command line, as a user meets them."""
import json
import os
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
import torch

from capcore.errors import run_cli
from capcore.harness import StopRequested
from tests.tensorboard_log import tb_steps, tb_values

ROOT = Path(__file__).resolve().parents[2]


def tiny_overrides(tmp: Path, data_root: Path, out: str) -> list[str]:
    return [f"data.root={data_root}", f"out_dir={tmp / out}", "data.input_size=32",
            "data.synthetic.n_train=40", "data.synthetic.n_test=8", "data.synthetic.size=32",
            "train.batch_size=16", "train.k=3", "train.anchors_per_batch=2", "train.epochs=0.3",
            "train.ckpt_every=2", "graph.m=8", "train.positives=4", "eval.k=5",
            "model.embed_dim=8", "train.lr=0.05", "train.log_every=1"]


def run(args, **kw):
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    return subprocess.run([sys.executable, *args], cwd=ROOT, env=env, capture_output=True, text=True, **kw)


def train(args: list[str]) -> int:
    """``python -m embedder.train ARGS`` in this process (cwd: the checkout): 0, or 3 where
    ``train.stop_after_steps`` stopped it as a kill would (``capcore.errors.run_cli`` exits 3 there)."""
    from embedder.train import main

    try:
        main(args)
    except StopRequested:
        return 3
    return 0


def cli(args: list[str], capsys) -> SimpleNamespace:
    """``python -m embedder.train ARGS`` in this process, through the command line's error handling
    (``capcore.errors.run_cli``): its exit status and what it printed on stderr."""
    from embedder.train import main

    capsys.readouterr()
    with pytest.raises(SystemExit) as stop:
        run_cli(lambda: main(args))
    return SimpleNamespace(returncode=stop.value.code, stderr=capsys.readouterr().err)


@pytest.fixture
def in_checkout(monkeypatch):
    monkeypatch.chdir(ROOT)  # the configs' relative paths, as the command runs from the checkout


@pytest.fixture(scope="module")
def data_root(tmp_path_factory):
    from capdata.synthetic import generate_poses

    root = tmp_path_factory.mktemp("poses") / "poses"
    generate_poses(root, n_train=40, n_test=8, seed=0, size=32)
    return root


@pytest.mark.parametrize("loss,extra", [("log_ratio", []), ("margin", []),
                                        ("log_ratio", ["train.head_warmup_steps=4"]),
                                        ("log_ratio", ["train.freeze=none", "train.jitter=0.3"]),  # whole trunk
                                        ("g17_hinge", ["train.sampler=g17_pool", "train.pool.queries=6",  # mined
                                                       "train.pool.per_query=2", "train.pool.refresh=4",  # at 0, 4:
                                                       "train.pool.triplets=8", "train.pool.per_pair=5",  # resumed
                                                       "method.margin=0.3"])])  # at 2 from the kept ones
def test_resume_after_kill_reproduces_uninterrupted_weights(tmp_path, data_root, loss, extra, in_checkout):
    common = ["--config", "configs/demo/demo_pose.yaml", f"method.loss={loss}",
              "method.mining=binary" if loss in ("margin", "g17_hinge") else "method.mining=dense", *extra]
    assert train(common + tiny_overrides(tmp_path, data_root, "full")) == 0
    killed = train(common + tiny_overrides(tmp_path, data_root, "killed") + ["train.stop_after_steps=3"])
    assert killed == 3  # died mid-run, like a kill
    method_dir = next((tmp_path / "killed" / "methods").iterdir())
    assert not (method_dir / "model.pt").exists()
    assert torch.load(method_dir / "last.pt", weights_only=True)["step"] == 2  # older than the kill: step 3 is lost
    assert train(common + tiny_overrides(tmp_path, data_root, "killed")) == 0
    a = torch.load(next((tmp_path / "full" / "methods").iterdir()) / "model.pt", weights_only=True)
    b = torch.load(method_dir / "model.pt", weights_only=True)
    assert a["step"] == b["step"] == 6
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key
    full_tb, killed_tb = next((tmp_path / "full" / "methods").iterdir()) / "tb", method_dir / "tb"
    for tag in ("train/loss", "train/grad_norm"):  # every step logged once: a resume neither loses nor repeats one
        assert tb_steps(full_tb, tag) == tb_steps(killed_tb, tag) == list(range(1, 7)), tag


def test_lr_end_fraction_ends_the_run_at_that_fraction(tmp_path, data_root, in_checkout, capsys):
    args = ["--config", "configs/demo/demo_pose.yaml", *tiny_overrides(tmp_path, data_root, "run"),
            "train.lr_end_fraction=0.25"]
    assert train(args) == 0
    lr = tb_values(next((tmp_path / "run" / "methods").iterdir()) / "tb", "train/lr")  # lr of the step after
    assert lr[6] == pytest.approx(0.05 * 0.25) and lr[3] == pytest.approx(0.05 * 0.5)  # 6 steps in all
    bad = cli([*args[:-1], "train.lr_end_fraction=0"], capsys)
    assert bad.returncode == 2 and "lr_end_fraction" in bad.stderr.splitlines()[-1]


def one_line_error(result, *needles):
    assert result.returncode == 2, result.stderr
    # progress bars may precede it (they redraw with \r); the error itself is one line, the last
    lines = [ln for ln in result.stderr.replace("\r", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in result.stderr, result.stderr
    for needle in needles:
        assert needle in errors[0], errors[0]


def pose_json_variant(tmp_path, data_root, mutate) -> Path:
    """Copy of the tiny pose set whose annotation ``mutate`` edits (images are symlinked)."""
    root = tmp_path / "variant"
    root.mkdir()
    (root / "images").symlink_to(data_root / "images")
    doc = json.loads((data_root / "poses.json").read_text())
    mutate(doc, root)
    (root / "poses.json").write_text(json.dumps(doc))
    return root


def train_on(tmp_path, root, capsys):
    return cli(["--config", str(ROOT / "configs/demo/demo_pose.yaml")]
               + tiny_overrides(tmp_path, root, "bad") + ["data.synthetic=null"], capsys)


def test_missing_image_is_one_line(tmp_path, data_root, capsys):
    def mutate(doc, root):
        doc["images"][0]["file"] = "images/not_there.png"
    one_line_error(train_on(tmp_path, pose_json_variant(tmp_path, data_root, mutate), capsys), "not_there.png")


def test_unreadable_image_is_one_line(tmp_path, data_root, capsys):
    def mutate(doc, root):
        (root / "broken.png").write_bytes(os.urandom(200))
        doc["images"][0]["file"] = "broken.png"
    one_line_error(train_on(tmp_path, pose_json_variant(tmp_path, data_root, mutate), capsys), "broken.png")


def test_wrong_joint_count_is_one_line(tmp_path, data_root, capsys):
    def mutate(doc, root):
        doc["images"][1]["joints"] = doc["images"][1]["joints"][:14]
    one_line_error(train_on(tmp_path, pose_json_variant(tmp_path, data_root, mutate), capsys), "poses.json", "14")


def test_malformed_annotation_is_one_line(tmp_path, data_root, capsys):
    root = tmp_path / "malformed"
    root.mkdir()
    (root / "poses.json").write_text('{"images": [')
    one_line_error(train_on(tmp_path, root, capsys), "poses.json")


def test_unknown_config_key_is_one_line(tmp_path):  # the real command line, as a user meets it
    one_line_error(run(["-m", "embedder.train", "--config", "configs/demo/demo_pose.yaml", "train.lrr=1"]),
                   "train.lrr")


def test_a_killed_run_resumes_when_run_dir_is_then_written_absolute(tmp_path, data_root, in_checkout):
    """Fingerprints see where paths point, not how they are spelled (capcore.fingerprint)."""
    common = ["--config", "configs/demo/demo_pose.yaml", "method.loss=log_ratio", "method.mining=dense"]
    tiny = [o for o in tiny_overrides(tmp_path, data_root, "-") if not o.startswith("out_dir=")]
    inside = tiny + ["out_dir=${run_dir}/killed"]
    assert train(common + inside + [f"run_dir={os.path.relpath(tmp_path, ROOT)}", "train.stop_after_steps=3"]) == 3
    assert train(common + inside + [f"run_dir={tmp_path}"]) == 0
    assert train(common + tiny + [f"out_dir={tmp_path / 'full'}"]) == 0
    a = torch.load(next((tmp_path / "full" / "methods").iterdir()) / "model.pt", weights_only=True)
    b = torch.load(next((tmp_path / "killed" / "methods").iterdir()) / "model.pt", weights_only=True)
    for key in a["model"]:
        assert torch.equal(a["model"][key], b["model"][key]), key


def test_log_ratio_with_dense_mining_trains_a_timm_vit_and_stage_two_reads_its_checkpoint(tmp_path, data_root,
                                                                                           in_checkout, capsys):
    """Issue #57: any backbone of the table trains in stage one and its checkpoint becomes features like a
    ResNet's; a stage it does not have (a ResNet's name on a ViT) is one line naming its own."""
    pytest.importorskip("timm")
    from feature_extract.backbone import load_backbone
    from feature_extract.config import BackboneConfig

    vit = ["--config", "configs/demo/demo_pose.yaml", "method.loss=log_ratio", "method.mining=dense",
           "model.arch=timm:vit_tiny_patch16_224", *tiny_overrides(tmp_path, data_root, "vit")]
    assert train(vit) == 0
    method_dir = next((tmp_path / "vit" / "methods").iterdir())
    saved = torch.load(method_dir / "model.pt", weights_only=True)
    assert saved["arch"] == "timm:vit_tiny_patch16_224" and saved["step"] == 6
    losses = tb_values(method_dir / "tb", "train/loss")
    assert len(losses) == 6 and all(np.isfinite(v) for v in losses.values())
    torch.manual_seed(0)
    from embedder.model import Embedder

    start = Embedder("timm:vit_tiny_patch16_224", 8).state_dict()  # the run's own init, seed 0 as in its config
    moved = [k for k in start if k.startswith("trunk.") and not torch.equal(start[k], saved["model"][k])]
    assert moved, "no trunk tensor trained"

    trunk, info = load_backbone(BackboneConfig(checkpoint=str(method_dir / "model.pt")))
    assert info.kind == "metric-learning" and info.arch == "timm:vit_tiny_patch16_224" and trunk.width == 192
    grid, vector = trunk.features_and_vector(torch.rand(2, 3, 32, 32))
    assert grid.shape == (2, 192, 2, 2) and vector.shape == (2, 192)  # 32 px / 16 px patches; the class token

    bad = cli(vit[:-len(tiny_overrides(tmp_path, data_root, "vit"))] + ["train.freeze=layer2"], capsys)
    one_line_error(bad, "train.freeze", "has no stage 'layer2'")


def test_the_pool_sampler_with_a_loss_it_does_not_mine_for_is_one_line(tmp_path, data_root, in_checkout, capsys):
    result = cli(["--config", "configs/demo/demo_pose.yaml", *tiny_overrides(tmp_path, data_root, "run"),
                  "train.sampler=g17_pool"], capsys)
    one_line_error(result, "g17_pool mines triplets for the g17_hinge loss, not log_ratio")
