"""The report's self-retrieval section (eval/reporting/self_retrieval_section.py): which images it shows, half where
the self-retrieval caption ranks its own image better than the baseline's by the most, half where worse, and which
runs it pairs (an RL and an RL+SR run of one model and features, both scored)."""
import json

from eval.reporting.inputs import CaptionRun
from eval.reporting.self_retrieval_section import chosen, pairs_of


def records(ranks: dict[int, int]) -> dict[int, dict]:
    return {i: {"image_id": i, "rank": r, "retrieved": i} for i, r in ranks.items()}


def test_it_shows_both_directions_largest_differences_first():
    base = records({1: 10, 2: 3, 3: 0, 4: 7, 5: 2, 6: 5})
    sr = records({1: 0, 2: 9, 3: 0, 4: 1, 5: 12, 6: 5})  # gains: 1 +10, 4 +6; losses: 5 -10, 2 -6; 3, 6 equal
    assert chosen(base, sr, 4) == [1, 4, 5, 2]
    assert chosen(base, sr, 3) == [1, 4, 5]
    assert chosen(base, records({i: 0 for i in range(1, 7)}), 4) == [1, 4, 6, 2]  # only gains: no loss to show
    # (6 and 2 gain 5 and 3; ties in gain go by image id)


def test_it_pairs_rl_with_rl_sr_of_the_same_model_and_features(tmp_path):
    def run(name, features, training, scored=True):
        folder = tmp_path / name
        folder.mkdir()
        if scored:
            (folder / "self_retrieval_test.json").write_text(json.dumps({"per_image": [
                {"image_id": 7, "rank": 2, "retrieved": 8}]}))
        return CaptionRun({"model": "Att2all2", "features": features, "training": training}, name, folder, None)

    runs = [run("a", "Img", "RL"), run("b", "Img", "RL+SR"), run("c", "Cap", "RL+SR"), run("d", "Cap", "XE"),
            run("e", "Cap", "RL", scored=False)]
    pairs = pairs_of(runs)
    assert [(p[0].label, p[1].label) for p in pairs] == [("a", "b")]  # Cap's RL is not scored: no pair
    assert pairs[0][2][7]["rank"] == 2
