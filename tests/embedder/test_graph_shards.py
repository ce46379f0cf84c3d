"""Sharded neighbour-graph builds (embedder.graph_shards): merged shards == the one-process graph."""
import itertools

import h5py
import numpy as np
import pytest

import embedder.graph_shards as gs
from capcore.errors import CapawareError, run_cli
from embedder import track
from embedder.config import load_config
from embedder.labels.graph import read_graph
from embedder.spaces import build_graph


def pose_cfg(tmp, *extra, data="poses"):
    return load_config("configs/demo/demo_pose.yaml", [
        f"data.root={tmp / data}", f"out_dir={tmp / 'run'}", "data.input_size=32", "data.synthetic.n_train=48",
        "data.synthetic.n_test=6", "data.synthetic.size=32", "graph.m=8", *extra])


def caption_cfg(tmp, *extra):
    return load_config("configs/demo/demo_caption.yaml", [
        f"data.root={tmp / 'captions'}", f"out_dir={tmp / 'run'}", "data.input_size=32",
        "data.synthetic.n_train=64", "data.synthetic.n_test=8", "data.synthetic.size=64",
        "captions.w2v_dim=16", "captions.w2v_epochs=2", "graph.m=6", "graph.workers=1", "graph.chunk=20", *extra])


def no_build(*args, **kwargs):
    raise AssertionError("the graph was built again")


def test_shard_ranges_tile_and_bad_shard_specs_are_refused():
    for n in (5, 48, 113287):
        for n_shards in (1, 2, 3, 5):
            ranges = [gs.shard_range(i, n_shards, n) for i in range(n_shards)]
            assert ranges[0][0] == 0 and ranges[-1][1] == n
            assert all(a[1] == b[0] for a, b in itertools.pairwise(ranges))
            assert max(h - lo for lo, h in ranges) - min(h - lo for lo, h in ranges) <= 1
    assert gs.parse_shard("2/3") == (2, 3)
    for bad in ("3/3", "1", "-1/2", "a/b"):
        with pytest.raises(CapawareError, match="--shard"):
            gs.parse_shard(bad)


@pytest.fixture(scope="module")
def pose(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("pose_shards")
    cfg = pose_cfg(tmp)
    space = gs.train_space(cfg)
    whole = build_graph(space, cfg, cfg.graph.m, tmp / "unused", progress=False)
    return tmp, cfg, space, whole


def test_pose_shards_merge_to_the_one_process_graph_and_study_reuses_it(pose, monkeypatch):
    tmp, cfg, space, whole = pose
    for i in (2, 0, 1):  # any order, as on separate machines
        gs.build_shard(cfg, i, 3, progress=False, space=space)
    monkeypatch.setattr(gs, "build_graph", no_build)
    gs.build_shard(cfg, 1, 3, progress=False, space=space)  # a rerun skips the finished shard
    merged = read_graph(gs.merge_shards(cfg, progress=False, space=space))
    assert np.array_equal(merged.nn_idx, whole.nn_idx) and np.array_equal(merged.nn_dist, whole.nn_dist)
    monkeypatch.setattr(track, "build_graph", no_build)
    got = track.load_or_build_graph(tmp / "run" / "labels.h5", space, cfg, cfg.graph.m)
    assert np.array_equal(got.nn_idx, whole.nn_idx)


def test_merge_refuses_missing_or_foreign_shards(pose, capsys):
    tmp, cfg, space, _ = pose
    for n_shards in (3, 2):  # (the 3 shards are already there when the test above ran: then skipped)
        for i in range(n_shards):
            gs.build_shard(cfg, i, n_shards, progress=False, space=space)
    folder = tmp / "run" / gs.SHARD_DIR
    with pytest.raises(CapawareError, match="several splittings"):  # N = 2 and N = 3 side by side
        gs.merge_shards(cfg, progress=False, space=space)
    gs.merge_shards(cfg, 2, progress=False, space=space)

    (folder / "shard_1_of_2.h5").rename(tmp / "kept.h5")
    with pytest.raises(CapawareError, match=r"missing: shard_1_of_2\.h5.*--shard 1/2"):
        gs.merge_shards(cfg, 2, progress=False, space=space)
    # another label-space parameter (input frame) written under the same out_dir
    other = pose_cfg(tmp, "data.input_size=48")
    gs.build_shard(other, 1, 2, progress=False)
    with pytest.raises(CapawareError, match=r"shard_1_of_2\.h5.*params differ: input_size is 48, "
                                            r"this config has 32.*--shard 1/2"):
        gs.merge_shards(cfg, 2, progress=False, space=space)
    # same params and size, other data (another synthetic seed): caught by the label-distance probe
    other = pose_cfg(tmp, "data.synthetic.seed=1", data="poses_seed1")
    gs.build_shard(other, 1, 2, progress=False)
    with pytest.raises(CapawareError, match=r"shard_1_of_2\.h5.*label-distance probe"):
        gs.merge_shards(cfg, 2, progress=False, space=space)
    # a shard of another m, and the CLI prints the refusal in one line
    with h5py.File(tmp / "kept.h5", "a") as f:
        f.attrs["m"] = 7
    (tmp / "kept.h5").replace(folder / "shard_1_of_2.h5")
    argv = ["merge", "--config", "configs/demo/demo_pose.yaml", "--shards", "2", f"data.root={tmp / 'poses'}",
                       f"out_dir={tmp / 'run'}", "data.input_size=32", "data.synthetic.n_train=48",
                       "data.synthetic.n_test=6", "data.synthetic.size=32", "graph.m=8"]
    with pytest.raises(SystemExit) as exit_:
        run_cli(lambda: gs.main(argv))
    assert exit_.value.code == 2
    err = [line for line in capsys.readouterr().err.splitlines() if "error" in line]
    assert len(err) == 1 and err[0].startswith("error: ") and "shard_1_of_2.h5" in err[0] and "m is 7" in err[0]


def test_caption_shards_merge_to_the_one_process_graph(tmp_path, monkeypatch):
    cfg = caption_cfg(tmp_path)
    space = gs.train_space(cfg)
    whole = build_graph(space, cfg, cfg.graph.m, tmp_path / "whole.chunks", progress=False)
    # shard 1 is rows [32, 64): chunks [32, 40), [40, 60), [60, 64) on the global grid, here solved by 2
    # worker processes; shard 0 in this process
    gs.build_shard(caption_cfg(tmp_path, "graph.workers=2"), 1, 2, progress=False, space=space)
    gs.build_shard(cfg, 0, 2, progress=False, space=space)
    chunk_dirs = list((tmp_path / "run" / "labels.chunks").glob("caption_graph-*"))
    assert sorted(p.name for p in chunk_dirs[0].glob("chunk_*")) == [
        f"chunk_{a:09d}_{b:09d}.npz" for a, b in ((0, 20), (20, 32), (32, 40), (40, 60), (60, 64))]
    monkeypatch.setattr(gs, "build_graph", no_build)
    merged = read_graph(gs.merge_shards(cfg, progress=False, space=space))
    assert np.array_equal(merged.nn_idx, whole.nn_idx) and np.array_equal(merged.nn_dist, whole.nn_dist)
    assert merged.attrs["method"] == whole.attrs["method"] and merged.attrs["merged_shards"] == 2
    assert merged.attrs["emd_solves"] == sum(read_graph(gs.shard_path(cfg.out_dir, i, 2)).attrs["emd_solves"]
                                             for i in range(2))
    monkeypatch.setattr(track, "build_graph", no_build)
    track.load_or_build_graph(tmp_path / "run" / "labels.h5", space, cfg, cfg.graph.m)
