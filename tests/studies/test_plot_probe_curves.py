"""studies/probes/plot_probe_curves.py: one line per file and row, named per file with --names; a bad --names is one
line."""
import json

import pytest

from studies.probes.plot_probe_curves import main

from capcore.errors import CapawareError


def curve(tmp_path, seed):
    p = tmp_path / f"s{seed}.json"
    p.write_text(json.dumps({"floor": {"colour": 0.07}, "rows": [
        {"row": "start", "step": 0, "probe": {"colour": 0.08}},
        {"row": "L", "step": 150, "probe": {"colour": 0.2 + seed / 10}}]}))
    return str(p)


def test_each_seed_is_a_named_line(tmp_path, monkeypatch):
    import matplotlib.axes

    labels = []
    plot = matplotlib.axes.Axes.plot
    monkeypatch.setattr(matplotlib.axes.Axes, "plot",
                        lambda ax, *a, **k: labels.append(k.get("label")) or plot(ax, *a, **k))
    main([curve(tmp_path, 0), curve(tmp_path, 1), "--groups", "colour", "--names", "seed 0", "seed 1",
          "--out", str(tmp_path / "fig.png")])
    assert labels == ["seed 0: L", "seed 1: L"]
    assert (tmp_path / "fig.png").read_bytes()[:4] == b"\x89PNG"


def test_names_must_match_the_files(tmp_path):
    with pytest.raises(CapawareError, match="1 names for 2 curve files"):
        main([curve(tmp_path, 0), curve(tmp_path, 1), "--names", "a", "--out", str(tmp_path / "fig.png")])
