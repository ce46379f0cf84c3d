import h5py
import numpy as np
import pytest

from capcore.errors import CapawareError
from embedder.labels.graph import build_graph_bruteforce, read_graph, write_graph
from tests.toy_spaces import LineLabels


def test_graph_matches_sorting_with_ties_by_index():
    x = np.array([0, 1, 1, 2, 5, 5, 5, 9], float)
    space = LineLabels(x)
    g = build_graph_bruteforce(space, m=3, chunk=3, progress=False)
    for i in range(len(x)):
        order = sorted((abs(x[i] - x[j]), j) for j in range(len(x)) if j != i)[:3]
        assert g.nn_idx[i].tolist() == [j for _, j in order]
        assert np.allclose(g.nn_dist[i], [d for d, _ in order])


def test_round_trip_and_incomplete_file_refused(tmp_path):
    path = tmp_path / "labels.h5"
    idx, dist = np.arange(6, dtype=np.int32).reshape(3, 2), np.ones((3, 2), np.float32)
    write_graph(path, idx, dist, {"label_space": "points", "m": 2})
    g = read_graph(path)
    assert np.array_equal(g.nn_idx, idx) and g.attrs["label_space"] == "points"
    with h5py.File(path, "a") as f:
        f.attrs["complete"] = False
    with pytest.raises(CapawareError, match="incomplete"):
        read_graph(path)


def test_not_an_hdf5_file(tmp_path):
    path = tmp_path / "labels.h5"
    path.write_text("hello")
    with pytest.raises(CapawareError, match=str(path)):
        read_graph(path)
