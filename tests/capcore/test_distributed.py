"""Multi-process training: ``torchrun --nproc_per_node 2`` (gloo, CPU) against one process, same global batch.

Tolerances (relative, per logged step of train/loss; TensorBoard stores float32):
- Captioner XE, dropout 0, no scheduled sampling: 1e-5. Measured ~1e-7: only the order of float32
  sums differs (DDP's gradient average vs one backward over the whole batch).
- Stage one, ``train.batchnorm=frozen``: 1e-4. Measured ~1e-5 after 6 SGD steps (step 1 is equal
  bit for bit); the same reordering of sums, amplified a little by the log-ratio's 1/D gradients
  through momentum. With ``batchnorm=batch`` each process normalises its own share of the batch, so
  the runs differ by BatchNorm statistics (measured 2-100% on this 15-image batch); that case is
  not compared here.
Both runs use shares of unequal size (15 images over 2 processes; a last captioner batch of one
image, which leaves one process a zero-weight stand-in). Each compared trajectory also crosses a
kill and a resume between process counts: stage one is killed under torchrun after step 3 and
resumed in one process; the captioner is killed in one process after step 3 (its checkpoint is
step 2) and resumed under torchrun. A spy records every atomic write (os.replace) per rank: rank 1
must write nothing. Two torchrun launches in all: each costs ~15 s of imports on 2 shared cores.
"""
import os
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest
import torch

from capcore import distributed
from capcore.device import pick_device
from capcore.errors import CapawareError
from tests.tensorboard_log import tb_values

ROOT = Path(__file__).resolve().parents[2]

pytestmark = pytest.mark.usefixtures("one_thread")

SPY = '''
import os, runpy, sys
log = open(os.path.join(os.environ["SPY_DIR"], "rank%s.txt" % os.environ["RANK"]), "a")
real_replace = os.replace
def replace(src, dst, *args, **kwargs):
    log.write(f"{dst}\\n")
    log.flush()
    return real_replace(src, dst, *args, **kwargs)
os.replace = replace
import captioners.data
reads = open(os.path.join(os.environ["SPY_DIR"], "reads%s.txt" % os.environ["RANK"]), "a")
real_getitems = captioners.data.CaptionDataset.__getitems__
def getitems(self, keys):  # the loader reads a batch at once
    for key in keys:
        if isinstance(key, tuple):  # a training read: (epoch, index); decoding reads plain indices
            reads.write("%d %d\\n" % key)
    reads.flush()
    return real_getitems(self, keys)
captioners.data.CaptionDataset.__getitems__ = getitems
sys.argv = sys.argv[1:]
runpy.run_module(sys.argv[0], run_name="__main__", alter_sys=True)
'''


def torchrun(tmp_path: Path, module: str, args: list[str], spy_dir: Path):
    spy_dir.mkdir(exist_ok=True)
    (tmp_path / "spy.py").write_text(SPY)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1", SPY_DIR=str(spy_dir))
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
           str(tmp_path / "spy.py"), module, *args]
    return subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)


def written(spy_dir: Path, rank: int) -> list[str]:
    path = spy_dir / f"rank{rank}.txt"
    return path.read_text().split() if path.is_file() else []


def assert_same_trajectory(one: dict[int, float], two: dict[int, float], steps: int, rtol: float) -> float:
    assert sorted(one) == sorted(two) == list(range(1, steps + 1)), (sorted(one), sorted(two))
    rel = max(abs(one[s] - two[s]) / abs(one[s]) for s in one)
    assert rel <= rtol, (one, two)
    return rel


# ---------------------------------------------------------------------------------------- stage one


def stage_one_args(data_root: Path, out: Path) -> list[str]:
    return ["--config", "configs/demo/demo_pose.yaml", f"data.root={data_root}", f"out_dir={out}",
            "data.input_size=32", "data.synthetic.n_train=40", "data.synthetic.n_test=8", "data.synthetic.size=32",
            "train.batch_size=15", "train.k=3", "train.anchors_per_batch=2", "train.epochs=0.3",
            "train.ckpt_every=2", "train.log_every=1", "graph.m=8", "train.positives=4", "eval.k=5",
            "model.embed_dim=8", "train.lr=0.001", "train.batchnorm=frozen", "train.precision=float32"]


def test_stage_one_two_processes_match_one_and_resume(tmp_path):
    from capdata.synthetic import generate_poses
    from embedder.train import main as train_main

    data = tmp_path / "poses"
    generate_poses(data, n_train=40, n_test=8, seed=0, size=32)
    train_main(stage_one_args(data, tmp_path / "one"))

    spy = tmp_path / "spy"
    killed = torchrun(tmp_path, "embedder.train", stage_one_args(data, tmp_path / "two") + ["train.stop_after_steps=3"],
                      spy)
    assert killed.returncode != 0, killed.stderr[-3000:]  # both processes died at step 3, like a kill
    method = tmp_path / "two" / "methods" / "l_log_ratio_m_dense"
    assert torch.load(method / "last.pt", weights_only=True)["step"] == 2 and not (method / "model.pt").exists()
    assert written(spy, 1) == []  # rank 1 wrote no checkpoint, graph or any other file
    assert "last.pt" in {Path(p).name for p in written(spy, 0)}
    train_main(stage_one_args(data, tmp_path / "two"))  # resumed in one process

    one = tb_values(tmp_path / "one" / "methods" / "l_log_ratio_m_dense" / "tb", "train/loss")
    rel = assert_same_trajectory(one, tb_values(method / "tb", "train/loss"), steps=6, rtol=1e-4)
    print(f"stage one: max relative loss difference {rel:.2e}")
    a = torch.load(tmp_path / "one" / "methods" / "l_log_ratio_m_dense" / "model.pt", weights_only=True)
    b = torch.load(method / "model.pt", weights_only=True)
    assert a["step"] == b["step"] == 6
    # two processes (killed at step 3, step 3 replayed) end where one process ends, up to the order of
    # the gradient all-reduce's float sums: 5e-7 of the weights' norm on the development machine
    keys = [k for k in a["model"] if a["model"][k].is_floating_point()]
    diff = sum(float((a["model"][k] - b["model"][k]).double().pow(2).sum()) for k in keys) ** 0.5
    norm = sum(float(a["model"][k].double().pow(2).sum()) for k in keys) ** 0.5
    assert diff < 1e-5 * norm, diff / norm
    assert len(list((method / "tb").glob("events.out.tfevents.*"))) == 2  # one per launch: rank 0's


# ------------------------------------------------------------------------------------------ captioner


@pytest.fixture(scope="module")
def captions(tmp_path_factory):
    """16 synthetic training images with prepro and random 2 x 2 x 8 features."""
    from tests.captioners.test_captioners import tiny_caption_set

    root = tmp_path_factory.mktemp("ddp_captions")
    return (root, *tiny_caption_set(root))


def captioner_args(captions, out: Path) -> list[str]:
    root, json_path, feats = captions
    return [f"data.json={json_path}", f"data.prepro_dir={root / 'prep'}", "data.word_count_threshold=1",
            f"data.features={feats}", f"out_dir={out}", "model.rnn_size=16", "model.input_encoding_size=12",
            "model.att_hid_size=8", "model.drop_prob_lm=0.0", "train.batch_size=5", "train.epochs=2",
            "train.lr=5e-3", "train.ckpt_every=2", "train.log_every=1", "val.batch_size=3",
            "train.precision=float32"]


def test_captioner_two_processes_match_one(captions, tmp_path):
    from captioners.config import load_captioner_config
    from captioners.xe import StopRequested, train

    def config(out, *extra):
        return load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml",
                                     captioner_args(captions, out) + list(extra))

    train(config(tmp_path / "one"), progress=False)
    with pytest.raises(StopRequested):  # killed in one process after step 3; last.pt holds step 2
        train(config(tmp_path / "two", "train.stop_after_steps=3"), progress=False)
    spy = tmp_path / "spy"
    run = torchrun(tmp_path, "captioners.xe",
                   ["--config", "configs/demo/demo_topdown.yaml", *captioner_args(captions, tmp_path / "two")], spy)
    assert run.returncode == 0, run.stderr[-3000:]
    # 16 images in batches of 5: 4 steps an epoch, the last batch one image (rank 1: a stand-in)
    rel = assert_same_trajectory(tb_values(tmp_path / "one" / "tb", "train/loss"),
                                 tb_values(tmp_path / "two" / "tb", "train/loss"), steps=8,
                                 rtol=1e-5)
    print(f"captioner: max relative loss difference {rel:.2e}")
    a = torch.load(tmp_path / "one" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "two" / "last.pt", weights_only=True)
    assert a["done"] and b["done"] and a["step"] == b["step"] == 8
    for key in a["model"]:  # alpha_net.bias shifts every attention logit: softmax makes its true
        if key != "core.attention.alpha_net.bias":  # gradient 0, so Adam follows rounding noise there
            torch.testing.assert_close(a["model"][key], b["model"][key], rtol=1e-4, atol=1e-5)
    assert written(spy, 1) == []
    assert {Path(p).name for p in written(spy, 0)} >= {"last.pt", "best.pt", "history.json", "config.yaml"}
    # every rank reads its own images of each global batch, and the order is the epoch's own permutation
    from captioners.data import EpochBatches
    reads = {r: [tuple(map(int, line.split())) for line in (spy / f"reads{r}.txt").read_text().splitlines()]
             for r in (0, 1)}
    epoch1 = {r: [i for e, i in reads[r] if e == 1] for r in (0, 1)}
    assert len(set(epoch1[0]) | set(epoch1[1])) == 16 and len(set(epoch1[0]) & set(epoch1[1])) == 1  # the stand-in

    def shares(epoch, rank):
        batches = [[i for _, i in keys] for keys in EpochBatches(16, 5, seed=0, epoch=epoch)]
        return [i for keys in batches for i in (keys[rank::2] or keys[:1])]

    assert epoch1[0] == shares(1, 0) and epoch1[1] == shares(1, 1) and shares(1, 0) != shares(0, 0)


def test_scst_two_processes_match_one(captions, tmp_path):
    """SCST (5 images a batch, 3 samples each, mean baseline, mixed objective) in one process and under
    torchrun: the same samples (one global noise tensor, each process its rows), the same loss per step
    and the same weights; killed in one process after step 3 (checkpoint at step 2, sampling RNG
    included) and resumed under torchrun."""
    from captioners.config import load_captioner_config
    from captioners.xe import train as xe_train
    from rl.config import load_scst_config
    from rl.scst import StopRequested
    from rl.scst import train as rl_train

    xe = xe_train(load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml",
                                        captioner_args(captions, tmp_path / "xe") + ["train.epochs=1"]), progress=False)
    root, json_path, feats = captions
    args = [f"data.json={json_path}", f"data.prepro_dir={root / 'prep'}", "data.word_count_threshold=1",
            f"data.features={feats}", f"init={xe}", "train.batch_size=5", "train.epochs=2", "train.lr=5e-3",
            "train.samples_per_image=3", "train.ckpt_every=2", "train.log_every=1", "val.batch_size=3",
            "train.precision=float32"]

    def config(out, *extra):
        return load_scst_config(ROOT / "configs/demo/demo_topdown_scst.yaml", args + [f"out_dir={out}", *extra])

    assert config(tmp_path).train.xe_weight > 0 and config(tmp_path).train.baseline == "mean"
    rl_train(config(tmp_path / "one"), progress=False)
    with pytest.raises(StopRequested):
        rl_train(config(tmp_path / "two", "train.stop_after_steps=3"), progress=False)
    spy = tmp_path / "spy"
    run = torchrun(tmp_path, "rl.scst", ["--config", "configs/demo/demo_topdown_scst.yaml", *args,
                                          f"out_dir={tmp_path / 'two'}"], spy)
    assert run.returncode == 0, run.stderr[-3000:]
    rel = {tag: assert_same_trajectory(tb_values(tmp_path / "one" / "tb", tag), tb_values(tmp_path / "two" / "tb", tag),
                                       steps=8, rtol=1e-5) for tag in ("scst/loss", "scst/reward", "scst/xe")}
    print(f"scst: max relative differences {rel}")
    a = torch.load(tmp_path / "one" / "last.pt", weights_only=True)
    b = torch.load(tmp_path / "two" / "last.pt", weights_only=True)
    assert a["done"] and b["done"] and a["step"] == b["step"] == 8
    for key in a["model"]:  # alpha_net.bias: see the captioner test
        if key != "core.attention.alpha_net.bias":
            torch.testing.assert_close(a["model"][key], b["model"][key], rtol=1e-4, atol=1e-5)
    assert written(spy, 1) == []


# ---------------------------------------------------------------------------------- selection logic


def test_captioner_configs_reject_an_unknown_precision():
    from captioners.config import load_captioner_config
    from rl.config import load_scst_config

    assert load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml").train.precision == "auto"
    with pytest.raises(CapawareError, match="train.precision"):
        load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml", ["train.precision=half"])
    with pytest.raises(CapawareError, match="train.precision"):
        load_scst_config(ROOT / "configs/demo/demo_topdown_scst.yaml", ["train.precision=half"])


def test_torchrun_process_takes_its_own_gpu(monkeypatch):
    chosen = []
    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: 2)
    monkeypatch.setattr(torch.cuda, "set_device", chosen.append)
    monkeypatch.setenv("WORLD_SIZE", "2")
    monkeypatch.setenv("LOCAL_RANK", "1")
    assert pick_device("auto") == torch.device("cuda", 1) and chosen == [1]
    monkeypatch.setenv("LOCAL_RANK", "2")
    with pytest.raises(CapawareError, match="nproc_per_node"):
        pick_device("cuda")
    monkeypatch.setenv("WORLD_SIZE", "1")
    assert pick_device("auto") == torch.device("cuda")


def test_shares_partition_every_global_batch():
    from captioners.data import EpochBatches, ShardedBatches

    for n, world in ((15, 2), (1, 2), (96, 4), (3, 4)):
        parts = [distributed.share(n, r, world) for r in range(world)]
        assert sorted(np.concatenate(parts).tolist()) == list(range(n))
        assert max(map(len, parts)) - min(map(len, parts)) <= 1
    glob = list(EpochBatches(11, 5, seed=0, epoch=0))  # batches of 5, 5, 1
    shares = [ShardedBatches(EpochBatches(11, 5, seed=0, epoch=0), r, 2) for r in range(2)]
    drawn = [list(s) for s in shares]
    for b, keys in enumerate(glob):
        real = [k for r in range(2) if shares[r].real[b] for k in drawn[r][b]]
        assert sorted(real) == sorted(keys)
    assert shares[1].real == [True, True, False] and drawn[1][2] == glob[2][:1]  # zero-weight stand-in


def test_batchnorm_under_torchrun_is_sync_on_cuda_frozen_on_cpu_and_never_per_process_by_default():
    from capcore.errors import CapawareError
    from embedder.train import prepare_batchnorm

    def bn_types(model):
        return {type(m) for m in model.modules() if isinstance(m, torch.nn.modules.batchnorm._BatchNorm)}

    def net():
        return torch.nn.Sequential(torch.nn.Conv2d(3, 4, 3), torch.nn.BatchNorm2d(4), torch.nn.Sequential(
            torch.nn.Conv2d(4, 4, 1), torch.nn.BatchNorm2d(4)))

    converted, mode = prepare_batchnorm(net(), "batch", torch.device("cuda"), world=2)  # converting needs no GPU
    assert mode == "sync" and bn_types(converted) == {torch.nn.SyncBatchNorm}
    model = net()
    assert prepare_batchnorm(model, "batch", torch.device("cpu"), world=2) == (model, "frozen")
    assert bn_types(model) == {torch.nn.BatchNorm2d}
    assert prepare_batchnorm(model, "batch", torch.device("cpu"), world=1) == (model, "batch")  # one process: plain BN
    assert prepare_batchnorm(model, "per_process", torch.device("cuda"), world=2) == (model, "per_process")
    with pytest.raises(CapawareError, match="train.batchnorm"):
        prepare_batchnorm(model, "sync", torch.device("cpu"), world=2)
    assert prepare_batchnorm(model, "sync", torch.device("cpu"), world=1) == (model, "sync")
    from embedder.config import load_config  # an unknown mode stops at the config, the one place that checks it
    with pytest.raises(CapawareError, match="train.batchnorm"):
        load_config("configs/demo/demo_pose.yaml", ["train.batchnorm=ghost"])


# ------------------------------------------------------------------------------------ caption graph

GRAPH_SCRIPT = '''
import sys
from capcore import distributed
from capcore.errors import run_cli
from embedder.config import load_config
from embedder.graph_shards import build_across_ranks
import torch

def main():
    cfg = load_config(sys.argv[1], sys.argv[2:])
    distributed.init(torch.device("cpu"))
    build_across_ranks(cfg, progress=False)
    distributed.leave()

run_cli(main)
'''


def test_the_caption_graph_split_across_two_ranks_equals_one_process(tmp_path):
    """Two gloo ranks each search half the queries (their own graph workers); rank 0 merges: labels.h5 equals
    the graph one process builds. Each rank's shard file shows it did its half."""
    from capdata.synthetic import generate_captions
    from embedder.config import load_config
    from embedder.graph_shards import shard_path, train_space
    from embedder.labels.graph import read_graph
    from embedder.spaces import build_graph

    root = tmp_path / "captions"
    generate_captions(root, n_train=40, n_test=4, seed=0, size=32)
    overrides = [f"data.root={root}", f"out_dir={tmp_path / 'two'}", "captions.w2v_dim=16", "captions.w2v_epochs=2",
                 "graph.m=6", "graph.workers=1", "graph.chunk=8"]
    (tmp_path / "graph_script.py").write_text(GRAPH_SCRIPT)
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")
    out = subprocess.run([sys.executable, "-m", "torch.distributed.run", "--standalone", "--nproc_per_node", "2",
                          str(tmp_path / "graph_script.py"), "configs/demo/demo_caption.yaml", *overrides],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-3000:]
    cfg = load_config("configs/demo/demo_caption.yaml", overrides)
    two = read_graph(tmp_path / "two" / "labels.h5")
    assert two.attrs["merged_shards"] == 2
    assert all(shard_path(cfg.out_dir, i, 2).is_file() for i in (0, 1))
    one = build_graph(train_space(cfg), cfg, 6, tmp_path / "one_chunks", progress=False)
    assert np.array_equal(two.nn_idx, one.nn_idx) and np.allclose(two.nn_dist, one.nn_dist, rtol=1e-6)
