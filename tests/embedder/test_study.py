"""A whole stage-one study on a tiny pose set, and the tables it produces."""
import json

import numpy as np
import pytest
from PIL import Image

from embedder.config import load_config
from embedder.retrieval_grid import tile_strip, write_grids
from embedder.retrieval_report import dims_table, load_rows, write_report
from embedder.rows import run_study


@pytest.fixture(scope="module")
def tiny_study(tmp_path_factory):
    tmp = tmp_path_factory.mktemp("study")
    cfg = load_config("configs/demo/demo_pose.yaml", [
        f"data.root={tmp / 'poses'}", f"out_dir={tmp / 'run'}", "data.input_size=32",
        "data.synthetic.n_train=48", "data.synthetic.n_test=6", "data.synthetic.size=32",
        "train.batch_size=16", "train.k=3", "train.anchors_per_batch=2", "train.epochs=0.1",
        "graph.m=8", "train.positives=4", "eval.k=10", "model.embed_dim=8",
        "methods=[{name: LR, loss: log_ratio}, {name: TB, loss: triplet, mining: binary, margin: 0.2}]"])
    return tmp, run_study(cfg, progress=False)


def test_study_writes_one_row_per_method_in_config_order(tiny_study):
    tmp, ret_dir = tiny_study
    rows = load_rows(ret_dir)
    assert list(rows) == ["Oracle", "Untrained", "LR", "TB"]
    assert np.allclose(rows["Oracle"]["ndcg"], 1.0)
    for name, row in rows.items():
        assert all(0 < v <= 1 + 1e-9 for v in row["ndcg"]), name
        # no ranking beats the oracle on mean label distance of the top K
        assert np.all(np.array(row["mean_dist"]) >= np.array(rows["Oracle"]["mean_dist"]) - 1e-5), name


def test_retrieved_distances_are_the_label_distances_of_the_retrieved_items(tiny_study):
    tmp, ret_dir = tiny_study
    from capdata.records import select
    from capdata.formats import read_records
    from embedder.labels.pose import PoseSpace

    cfg = load_config(tmp / "run" / "config.yaml")
    records = read_records(cfg.data)
    evalset = select(records, np.isin(records.splits, ["test", "train"]))
    space = PoseSpace(evalset, cfg.data.input_size)
    with np.load(ret_dir / "lr.npz") as f:
        q, db = f["query_items"], f["db_items"]
        want = np.stack([space.pairwise(q[i:i + 1], db[f["retrieved"][i]])[0] for i in range(len(q))])
        assert np.allclose(f["retrieved_dist"], want, atol=1e-4)
        # the ideal distances are the smallest ones of the whole database, ascending
        full = np.sort(space.pairwise(q, db), axis=1)[:, :f["ideal_dist"].shape[1]]
        assert np.allclose(f["ideal_dist"], full, atol=1e-4)


def test_report_and_grids(tiny_study, tmp_path):
    _, ret_dir = tiny_study
    table = write_report(ret_dir, tmp_path, "tiny")
    assert "| Oracle | 1.000" in table
    saved = json.loads((tmp_path / "retrieval.json").read_text())
    assert list(saved["rows"]) == ["Oracle", "Untrained", "LR", "TB"]
    assert (tmp_path / "curves.png").stat().st_size > 1000
    grids = write_grids(ret_dir, tmp_path, queries=[0], top=4)
    assert grids[0].stat().st_size > 1000


def test_dims_table_pivots_methods_by_dimension():
    rows = {"A 16-D": {"ndcg": [0.1] * 10}, "A 32-D": {"ndcg": [0.2] * 10}, "B 16-D": {"ndcg": [0.3] * 10}}
    table = dims_table(rows, k=10)
    assert "| A | 0.100 | 0.200 |" in table and "| B | 0.300 | - |" in table
    assert dims_table({"Oracle": {"ndcg": [1.0] * 10}}) is None


def test_gap_line_names_the_share_of_the_baseline_to_oracle_gap_each_row_closes():
    from embedder.retrieval_report import gap_closed, markdown_table

    row = lambda v, order: {"order": order, "ndcg": [v] * 10, "mean_dist": [1.0] * 10, "n_queries": 5}
    rows = {"Oracle": row(1.0, 0), "Img": row(0.8, 1), "A": row(0.86, 2), "B": row(0.78, 3)}
    base, shares = gap_closed(rows)
    assert base == "Img" and shares["A"] == pytest.approx(0.3) and shares["B"] == pytest.approx(-0.1)
    assert markdown_table(rows, "t").splitlines()[-1] == (
        "Share of the Img-to-Oracle nDCG@10 gap closed: A +30%, B -10%; best trained row: A.")
    assert gap_closed({"Oracle": row(1.0, 0), "Img": row(0.8, 1)}) is None  # nothing trained


def test_a_grid_row_is_its_tiles_side_by_side_with_white_gaps(tmp_path):
    """The grid's rows are strips (one axes per method): each tile is its image, resized to the first's size."""
    rng = np.random.default_rng(0)
    a, b = rng.integers(0, 255, (6, 5, 3), np.uint8), rng.integers(0, 255, (12, 10, 3), np.uint8)
    Image.fromarray(a).save(tmp_path / "a.png")
    Image.fromarray(b).save(tmp_path / "b.png")
    strip = tile_strip([str(tmp_path / "a.png"), str(tmp_path / "b.png"), str(tmp_path / "a.png")], gap=2)
    assert strip.shape == (6, 5 * 3 + 2 * 2, 3)
    assert np.array_equal(strip[:, :5], a) and np.array_equal(strip[:, 14:], a)
    assert np.array_equal(strip[:, 7:12], np.asarray(Image.fromarray(b).resize((5, 6))))
    assert (strip[:, 5:7] == 255).all() and (strip[:, 12:14] == 255).all()
