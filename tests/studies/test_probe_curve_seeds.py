"""studies/probes/probe_curve_seeds.py: probe curves summed up over seeds, against a direct computation."""
import json

import numpy as np
import pytest

from studies.probes.probe_curve_seeds import load, table

from capcore.errors import CapawareError


def curve(tmp_path, seed, colour_at_300, reach_300=True):
    rows = [{"row": "start", "step": 0, "probe": {"colour": 0.08, "shape": 0.8}},
            {"row": "L", "step": 150, "probe": {"colour": 0.2 + seed / 100, "shape": 0.4}}]
    if reach_300:
        rows.append({"row": "L", "step": 300, "probe": {"colour": colour_at_300, "shape": 0.5}})
    p = tmp_path / f"s{seed}.json"
    p.write_text(json.dumps({"command": f"probe_curve seed={seed}", "floor": {"colour": 0.07, "shape": 0.09},
                             "rows": rows}))
    return str(p)


def test_mean_spread_and_seeds_past_the_target_per_step(tmp_path):
    out = table(load([curve(tmp_path, s, v) for s, v in enumerate([0.45, 0.55, 0.6])]), "colour", 0.5)
    last = next(line for line in out.splitlines() if line.startswith("| L | 300 |"))
    v = np.array([0.45, 0.55, 0.6])
    assert f"{v.mean():.3f} ± {v.std(ddof=1):.3f}" in last
    assert "0.450, 0.550, 0.600" in last and last.endswith("| 2 of 3 |")
    assert "| L | 150 |" in out and "probe_curve seed=2" in out


def test_a_step_not_every_seed_reached_is_left_out(tmp_path):
    out = table(load([curve(tmp_path, 0, 0.5), curve(tmp_path, 1, 0.5, reach_300=False)]), "colour", 0.5)
    assert "| L | 150 |" in out and "| L | 300 |" not in out


def test_a_missing_curve_is_one_line(tmp_path):
    with pytest.raises(CapawareError, match="not found"):
        load([str(tmp_path / "none.json")])
