"""studies.probes.grid_probe: ridge probes on the attention grid, against a direct least-squares fit and on oracle
features."""
import numpy as np
import pytest

from studies.probes.grid_probe import Ridge, main


@pytest.mark.parametrize("n,d", [(40, 6), (8, 30)])  # more rows than inputs, and fewer (the flat probe's case)
def test_ridge_equals_a_direct_least_squares_fit(n, d):
    rng = np.random.default_rng(n + d)
    x, y = rng.normal(size=(n, d)) * rng.uniform(0.1, 3, d), rng.normal(size=(n, 3))
    ridge = Ridge(x, y)
    for lam in (1e-3, 0.7, 25.0):
        # min |[1 x] [b; W] - y|^2 + lam |W|^2, written as one stacked least-squares problem (intercept unpenalised)
        a = np.vstack([np.hstack([np.ones((n, 1)), x]), np.hstack([np.zeros((d, 1)), np.sqrt(lam) * np.eye(d)])])
        coef = np.linalg.lstsq(a, np.vstack([y, np.zeros((d, 3))]), rcond=None)[0]
        probe = rng.normal(size=(5, d))
        np.testing.assert_allclose(ridge.predict(probe, lam), coef[0] + probe @ coef[1:], rtol=1e-8, atol=1e-10)


def test_oracle_grid_is_read_back_by_the_cell_probe(tmp_path):
    """A positive control: features that are the cell contents must probe near perfectly."""
    import json
    import shutil

    import h5py

    from capdata.synthetic import generate_captions
    from feature_extract.oracle import main as oracle

    generate_captions(tmp_path / "c", n_train=80, n_test=20, seed=5, size=64)
    refs = tmp_path / "c" / "dataset_coco.json"
    oracle(["--karpathy", str(refs), "--out", str(tmp_path / "o.h5"), "--att-size", "3"])
    noise = tmp_path / "noise.h5"  # the same file with its grid shuffled across images: a negative control
    shutil.copy(tmp_path / "o.h5", noise)
    with h5py.File(noise, "r+") as f:
        att = f["att"][()]
        f["att"][()] = att[np.random.default_rng(0).permutation(len(att))]
    main(["--karpathy", str(refs), "--features", f"Oracle={tmp_path / 'o.h5'}", f"Shuffled={noise}",
          "--paired", "Oracle=Shuffled", "--out", str(tmp_path / "out")])
    rows = json.loads((tmp_path / "out" / "grid_probe.json").read_text())["rows"]
    good, bad = rows["Oracle"][0], rows["Shuffled"][0]
    assert good["grid"] == 3
    for group in ("colour", "shape", "size", "count"):
        assert good["cell"][group] >= 0.95, (group, good["cell"])
    for group in ("colour", "shape", "size"):  # scored on occupied cells: a shuffled grid knows nothing there
        assert bad["cell"][group] < 0.3, (group, bad["cell"])
    assert bad["cell"]["count"] < good["cell"]["count"] - 0.1  # on every cell, where "empty" is the majority
    assert good["flat"]["position"] > bad["flat"]["position"] + 0.2
    md = (tmp_path / "out" / "grid_probe.md").read_text()
    assert "Oracle − Shuffled (paired)" in md and "Cell probe" in md
    smallest = next(line for line in md.splitlines() if line.startswith("| Oracle − Shuffled, smallest seed |"))
    assert f"{good['cell']['colour'] - bad['cell']['colour']:+.3f}" in smallest  # one seed: its own difference
