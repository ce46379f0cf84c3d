"""feature_extract.stats and studies.trunks.feature_scale (issue #46): norms and channel statistics against numpy."""
from __future__ import annotations

import h5py
import numpy as np
import pytest

from capcore.errors import CapawareError
from studies.trunks.feature_scale import main
from feature_extract.stats import channel_stats, mean_norms


def fake_features(path, n=300, cells=4, c=6, scale=3.0):
    rng = np.random.default_rng(0)
    att = (rng.normal(1.0, scale, (n, cells, c))).astype(np.float16)
    att[:, :, 2] = 5.0  # a channel that never varies
    fc = att.mean(1)
    skipped = np.zeros(n, bool)
    skipped[7] = True
    with h5py.File(path, "w") as f:
        f["att"], f["fc"], f["skipped"] = att, fc, skipped
        f["image_id"] = np.arange(n)
    return att.astype(np.float64), fc.astype(np.float64), skipped


def test_norms_and_channel_statistics_match_numpy(tmp_path, capsys):
    path = tmp_path / "f.h5"
    att, fc, skipped = fake_features(path)
    norms = mean_norms(path)
    keep = ~skipped
    assert norms["images"] == 299
    assert norms["att_l2"] == pytest.approx(np.linalg.norm(att[keep], axis=2).mean(), rel=1e-9)
    assert norms["fc_l2"] == pytest.approx(np.linalg.norm(fc[keep], axis=1).mean(), rel=1e-9)
    rows = np.array([250, 3, 40, 41, 42, 299, 100])  # any order, gaps and all
    stats = channel_stats(path, rows)
    cells = att[np.sort(rows)].reshape(-1, att.shape[-1])
    assert np.allclose(stats.att_mean, cells.mean(0), atol=1e-5)
    assert np.allclose(stats.att_std[[0, 1, 3]], cells.std(0)[[0, 1, 3]], rtol=1e-5)
    assert stats.att_std[2] == 1.0  # constant channel: passed unscaled
    assert np.allclose(stats.fc_mean, fc[rows].mean(0), atol=1e-5)
    main([f"Toy={path}"])
    out = capsys.readouterr().out
    assert f"| Toy | 299 | {norms['att_l2']:.3f} | {norms['fc_l2']:.3f} |" in out


def test_a_missing_file_is_one_line(tmp_path):
    with pytest.raises(CapawareError, match="features file not found"):
        main([f"X={tmp_path / 'nope.h5'}"])
    with pytest.raises(CapawareError, match="LABEL=FEATS.h5"):
        main(["justapath.h5"])
