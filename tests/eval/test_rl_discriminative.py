"""Discriminativeness metrics (eval/captions_discriminative.py, Liu et al. 2018) on hand-counted
captions, and their place in eval.score_captions' metrics JSON."""
import json

import pytest

from captioners.discriminative import discriminativeness
from eval.captions_discriminative import metrics_section, summary_line
from tests.fixtures_builders import write_karpathy


def test_hand_counted_uniqueness_novelty_vocabulary_and_length():
    captions = ["a dog", "A dog.", "a cat", "a bird flies"]
    train = ["a cat", "a dog runs", "A bird  flies"]
    m = discriminativeness(captions, train)
    assert m["n_captions"] == 4
    assert m["unique_captions"] == pytest.approx(2 / 4)  # "a dog" twice (case and punctuation do not count)
    assert m["distinct_captions"] == pytest.approx(3 / 4)
    assert m["novel_captions"] == pytest.approx(2 / 4)  # "a dog" x2 unseen; "a cat", "a bird flies" seen
    assert m["vocab_size"] == 5 and m["mean_length"] == pytest.approx(9 / 4)
    assert m["bad_endings"] == pytest.approx(2 / 4)  # references end on cat, runs, flies: "a dog" x2 does not
    assert discriminativeness(captions)["novel_captions"] is None
    assert discriminativeness(captions)["bad_endings"] is None
    with pytest.raises(ValueError):
        discriminativeness([])


def test_bad_endings_count_captions_that_stop_where_no_reference_stops():
    train = ["a man riding a horse", "a horse on a beach", "two dogs"]  # endings: horse, beach, dogs
    captions = ["a man riding a horse on a", "a horse", "a dog on the beach", "two dogs on", ""]
    m = discriminativeness(captions, train)
    # "... on a" (a), "... on" (on) and the empty caption end nowhere a reference ends
    assert m["bad_endings"] == pytest.approx(3 / 5)


def test_metrics_section_reads_training_captions_of_a_karpathy_json(tmp_path):
    refs = write_karpathy(tmp_path / "k", write_images=False)
    # train + restval captions of the fixture: "A bowl of broccoli.", "Green vegetables in a dish", "A dog runs."
    section = metrics_section({73: "a dog runs", 74: "a cat sits"}, refs)
    assert section["novel_captions"] == pytest.approx(0.5) and section["unique_captions"] == 1.0
    assert "unique 100.00%" in summary_line(section) and "bad endings 50.00%" in summary_line(section)
    coco = tmp_path / "captions_val.json"
    coco.write_text(json.dumps({"annotations": [{"image_id": 74, "caption": "a cat"}]}))
    section = metrics_section({74: "a cat"}, coco)
    assert section["novel_captions"] is None and "Karpathy" in section["note"]


def test_eval_captions_writes_the_section_into_the_metrics_json(tmp_path):
    from eval.score_captions import main

    refs = write_karpathy(tmp_path / "k", write_images=False)
    preds = tmp_path / "preds.json"
    preds.write_text(json.dumps([{"image_id": 74, "caption": "a cat"}]))
    out = tmp_path / "m.json"
    main(["--preds", str(preds), "--refs", str(refs), "--split", "test", "--out", str(out), "--tokenizer", "simple",
          "--no-meteor", "--no-spice"])
    report = json.loads(out.read_text())
    assert report["discriminativeness"]["novel_captions"] == 1.0
    assert report["discriminativeness"]["vocab_size"] == 2
