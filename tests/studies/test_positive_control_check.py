"""studies/positive_control/positive_control_check.py: the declared recipe, budget and verdict rules against
hand-worked curves."""
import json

import pytest

from studies.positive_control.positive_control_check import choose_budget, choose_recipe, main, verdict

from capcore.errors import CapawareError


def curve(val, test, name="run"):
    """A probe curve whose trained row has these colour probes at steps 150, 300, ... (val and test)."""
    rows = [{"row": "start", "step": 0, "probe": {"colour": 0.9}, "probe_val": {"colour": 0.9}}]  # never counted
    rows += [{"row": "L", "step": 150 * (i + 1), "probe": {"colour": t}, "probe_val": {"colour": v}}
             for i, (v, t) in enumerate(zip(val, test))]
    return {"command": name, "floor": {"colour": 0.08}, "rows": rows}


def test_the_recipe_kept_is_the_higher_best_val_colour_and_the_first_on_ties():
    a, b = curve([0.2, 0.5, 0.4], [0.9, 0.9, 0.9]), curve([0.3, 0.45, 0.48], [0.0, 0.0, 0.0])
    assert choose_recipe({"layer4_10x": a, "layer4_30x": b}) == "layer4_10x"  # test accuracy plays no part
    assert choose_recipe({"layer4_10x": b, "layer4_30x": a}) == "layer4_30x"
    assert choose_recipe({"layer4_10x": a, "layer4_30x": curve([0.5, 0.1, 0.1], [1, 1, 1])}) == "layer4_10x"


def test_the_budget_is_the_earliest_step_every_seed_reaches_on_val_else_the_best_mean():
    seeds = [curve([0.4, 0.55, 0.6], [0.1] * 3), curve([0.5, 0.49, 0.7], [0.1] * 3), curve([0.6, 0.6, 0.5], [0.1] * 3)]
    assert choose_budget(seeds, 0.5) == (450, True)  # step 300 misses on seed 1 (.49)
    low = [curve([0.3, 0.45, 0.4], [0.9] * 3), curve([0.35, 0.4, 0.44], [0.9] * 3)]
    assert choose_budget(low, 0.5) == (300, False)  # means .325, .425, .42


def test_the_verdict_needs_the_floor_on_every_seed_and_the_margin_below_it_on_each():
    real = [curve([0.6] * 2, [0.55, 0.70]), curve([0.6] * 2, [0.52, 0.66]), curve([0.6] * 2, [0.58, 0.61])]
    shuffled = [curve([0.2] * 2, [0.30, 0.20]), curve([0.2] * 2, [0.40, 0.10]), curve([0.2] * 2, [0.30, 0.20])]
    v = verdict(real, shuffled, 0.5, 0.2)
    assert v["budget"] == 150 and v["real"] == [0.55, 0.52, 0.58] and v["real_holds"]
    assert not v["negative_holds"] and not v["counts"]  # seed 1: .52 - .40 = .12 < .20
    shuffled[1] = curve([0.2] * 2, [0.30, 0.10])
    assert verdict(real, shuffled, 0.5, 0.2)["counts"]
    real[2] = curve([0.6] * 2, [0.49, 0.61])  # the floor is not reached on test at the budget val chose
    assert not verdict(real, shuffled, 0.5, 0.2)["real_holds"]
    with pytest.raises(CapawareError, match="2 shuffled runs for 3 real ones"):
        verdict(real, shuffled[:2], 0.5, 0.2)


def test_the_command_writes_the_verdict_with_the_declared_floor_and_margin(tmp_path):
    paths = {}
    for name, c in {"r0": curve([0.6], [0.7]), "r1": curve([0.6], [0.6]), "r2": curve([0.6], [0.5]),
                    "s0": curve([0.1], [0.1]), "s1": curve([0.1], [0.1]), "s2": curve([0.1], [0.35])}.items():
        paths[name] = tmp_path / f"{name}.json"
        paths[name].write_text(json.dumps(c))
    main(["verdict", "--real", *(str(paths[f"r{i}"]) for i in range(3)),
          "--shuffled", *(str(paths[f"s{i}"]) for i in range(3)), "--out", str(tmp_path / "out")])
    v = json.loads((tmp_path / "out" / "positive_control.json").read_text())
    assert (v["floor"], v["margin"]) == (0.5, 0.2) and v["real_holds"] and not v["negative_holds"]  # .5 - .35 < .2
    assert "does not count" in (tmp_path / "out" / "positive_control.md").read_text()
