"""eval.score_captions against hand-checked values and against pycocoevalcap called directly; SPICE absent
is reported, not a crash; the Java parts (PTB tokenizer, METEOR) run offline. One METEOR start per
module (its paraphrase table takes seconds to load)."""
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from capcore.errors import CapawareError, run_cli
from eval import captions_java as jv
from capdata.captions import read_references
from eval.caption_refs import load_preds
from eval.score_captions import main, score_captions

ROOT = Path(__file__).resolve().parents[2]
needs_java = pytest.mark.skipif(jv.java_info() is None, reason="no Java runtime")

IMAGES = [
    {"cocoid": 1, "split": "test", "filename": "1.jpg", "sentences": [
        {"raw": "A dog runs on the green grass.", "tokens": ["a", "dog", "runs", "on", "the", "green", "grass"]},
        {"raw": "A brown dog, running outside!", "tokens": ["a", "brown", "dog", "running", "outside"]}]},
    {"cocoid": 2, "split": "test", "filename": "2.jpg", "sentences": [
        {"raw": "Two cats sleep on a red sofa.", "tokens": ["two", "cats", "sleep", "on", "a", "red", "sofa"]},
        {"raw": "Cats napping on the couch", "tokens": ["cats", "napping", "on", "the", "couch"]}]},
    {"cocoid": 3, "split": "test", "filename": "3.jpg", "sentences": [
        {"raw": "A man rides a bike down the street.",
         "tokens": ["a", "man", "rides", "a", "bike", "down", "the", "street"]}]},
    {"cocoid": 4, "split": "val", "filename": "4.jpg", "sentences": [
        {"raw": "A plate of food.", "tokens": ["a", "plate", "of", "food"]}]},
    {"cocoid": 5, "split": "test", "filename": "5.jpg", "sentences": [
        {"raw": "A red kite in a blue sky.", "tokens": ["a", "red", "kite", "in", "a", "blue", "sky"]}]},
]
TEST_IDS = [1, 2, 3, 5]
# image 5's caption is empty (a decoder may emit EOS first): documented as 0 on every metric
PREDS = {1: "A dog runs on the green grass", 2: "a cat sleeping on a sofa", 5: "", 3: "purple elephants fly"}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    root = tmp_path_factory.mktemp("capmetrics")
    refs = root / "dataset_coco.json"
    refs.write_text(json.dumps({"images": IMAGES, "dataset": "coco"}))
    preds = root / "preds.json"
    preds.write_text(json.dumps([{"image_id": i, "caption": c} for i, c in PREDS.items()]))
    return root, refs, preds


@pytest.fixture(scope="module")
def scored(files, tmp_path_factory):
    _, refs, _ = files
    gts = read_references(refs, "test").refs
    empty = tmp_path_factory.mktemp("no_corenlp")  # SPICE's models surely absent here
    started = []
    real_popen = jv.subprocess.Popen
    with pytest.MonkeyPatch.context() as mp:  # count Java starts (subprocess.run goes through Popen too)
        mp.setattr(jv.subprocess, "Popen", lambda cmd, **kw: started.append(cmd) or real_popen(cmd, **kw))
        s = score_captions(PREDS, gts, meteor=jv.java_info() is not None, corenlp_dir=empty,
                           tokenizer="ptb" if jv.java_info() else "simple")
    s.java_starts = [" ".join(map(str, c)) for c in started if "-version" not in c]
    return s


def test_refs_from_karpathy_and_coco_formats(files, tmp_path):
    _, refs, _ = files
    gts, fmt, split = read_references(refs, "test")
    assert (fmt, split) == ("karpathy", "test") and sorted(gts) == TEST_IDS
    assert gts[1][1] == "A brown dog, running outside!"
    assert sorted(read_references(refs, "all")[0]) == [1, 2, 3, 4, 5]
    coco = tmp_path / "captions_val2014.json"
    coco.write_text(json.dumps({"images": [{"id": 5}], "annotations": [
        {"image_id": 5, "id": 1, "caption": "A cat."}, {"image_id": 5, "id": 2, "caption": "Some cat"}]}))
    assert read_references(coco) == ({5: ["A cat.", "Some cat"]}, "coco_file", None)  # a format without splits


@needs_java
def test_ptb_tokenizer_offline_matches_pycocoevalcap():
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    sents = ["A man, riding a horse.", "The dog's toy (red)!", "", "Ünïcode café -- fine..."]
    ours = jv.ptb_tokenize(sents)
    theirs = PTBTokenizer().tokenize({i: [{"caption": s}] for i, s in enumerate(sents)})
    # "-lrb-" stays, exactly as in coco-caption: its punctuation list holds "-LRB-" but -lowerCase runs first
    assert ours[:3] == ["a man riding a horse", "the dog 's toy -lrb- red -rrb-", ""]
    assert ours == [theirs[i][0] for i in range(len(sents))]


def test_identical_prediction_scores_one_and_nonsense_zero(scored):
    one, none = scored.per_image[1], scored.per_image[3]
    assert one["BLEU-1"] == pytest.approx(1.0, abs=1e-6) and one["BLEU-4"] == pytest.approx(1.0, abs=1e-6)
    assert one["ROUGE-L"] == pytest.approx(1.0)
    assert none["BLEU-1"] == pytest.approx(0.0, abs=1e-6) and none["CIDEr-D"] == 0.0
    if "METEOR" not in scored.unavailable:
        assert one["METEOR"] > 0.95 and none["METEOR"] == pytest.approx(0.0, abs=1e-6)
        per = [p["METEOR"] for p in scored.per_image.values()]
        assert min(per) < scored.metrics["METEOR"] < max(per)  # METEOR aggregates statistics over the corpus


def test_empty_caption_scores_zero_on_every_metric_and_counts_in_the_mean(scored):
    empty = scored.per_image[5]
    assert set(empty) >= {"BLEU-1", "BLEU-4", "ROUGE-L", "CIDEr-D"}
    assert all(v == pytest.approx(0.0, abs=1e-6) for v in empty.values()), empty
    cider = [scored.per_image[i]["CIDEr-D"] for i in TEST_IDS]
    assert scored.metrics["CIDEr-D"] == pytest.approx(sum(cider) / 4)  # averaged over all 4, the empty one too


@needs_java
def test_metrics_equal_pycocoevalcap_called_directly(scored):
    from pycocoevalcap.bleu.bleu import Bleu
    from pycocoevalcap.cider.cider import Cider
    from pycocoevalcap.rouge.rouge import Rouge
    from pycocoevalcap.tokenizer.ptbtokenizer import PTBTokenizer

    tok = PTBTokenizer()
    test = [im for im in IMAGES if im["split"] == "test"]
    gts = tok.tokenize({im["cocoid"]: [{"caption": s["raw"]} for s in im["sentences"]] for im in test})
    res = tok.tokenize({i: [{"caption": PREDS[i]}] for i in gts})
    assert res[5] == [""]
    cider, cider_per = Cider().compute_score(gts, res)
    assert scored.metrics["CIDEr-D"] == pytest.approx(cider, abs=1e-9)
    assert [scored.per_image[i]["CIDEr-D"] for i in gts] == pytest.approx(list(cider_per), abs=1e-9)
    bleu, bleu_per = Bleu(4).compute_score(gts, res, verbose=0)
    assert [scored.metrics[f"BLEU-{n}"] for n in range(1, 5)] == pytest.approx(bleu, abs=1e-9)
    assert [scored.per_image[i]["BLEU-4"] for i in gts] == pytest.approx(bleu_per[3], abs=1e-9)
    rouge, rouge_per = Rouge().compute_score(gts, res)
    assert scored.metrics["ROUGE-L"] == pytest.approx(rouge, abs=1e-9)
    assert [scored.per_image[i]["ROUGE-L"] for i in gts] == pytest.approx(list(rouge_per), abs=1e-9)
    if "METEOR" not in scored.unavailable:  # pycocoevalcap's own wrapper: one more Java start (~5 s)
        from pycocoevalcap.meteor.meteor import Meteor

        meteor, meteor_per = Meteor().compute_score(gts, res)
        assert scored.metrics["METEOR"] == pytest.approx(meteor, abs=1e-9)
        assert [scored.per_image[i]["METEOR"] for i in gts] == pytest.approx(meteor_per, abs=1e-9)


@needs_java
def test_one_java_process_per_scoring_run(scored):
    assert sum("meteor-1.5.jar" in c for c in scored.java_starts) == 1
    assert sum("PTBTokenizer" in c for c in scored.java_starts) == 1
    assert len(scored.java_starts) == 2


def test_spice_without_models_is_reported_not_a_crash(scored):
    assert scored.metrics["SPICE"] is None
    why = scored.unavailable["SPICE"]
    assert "CoreNLP 3.6.0" in why and "stanford-corenlp-3.6.0-models.jar" in why
    assert all(scored.metrics[m] is not None for m in ("BLEU-4", "ROUGE-L", "CIDEr-D"))


def test_cli_writes_metrics_with_command_and_config_hash(files, tmp_path, capsys):
    root, refs, preds = files
    (root / "preds.meta.json").write_text(json.dumps({"config_hash": "abc123"}))
    out, per = tmp_path / "metrics.json", tmp_path / "per_image.json"
    main(["--preds", str(preds), "--refs", str(refs), "--split", "test", "--out", str(out), "--per-image", str(per),
          "--no-meteor", "--corenlp-dir", str(tmp_path), "--tokenizer", "ptb" if jv.java_info() else "simple"])
    report = json.loads(out.read_text())
    assert set(report["metrics"]) == {"BLEU-1", "BLEU-2", "BLEU-3", "BLEU-4", "METEOR", "ROUGE-L", "CIDEr-D", "SPICE"}
    assert report["metrics"]["SPICE"] is None and report["metrics"]["METEOR"] is None
    assert report["config_hash"] == "abc123" and report["command"].startswith("python -m eval.score_captions --preds")
    assert report["n_images"] == 4 and report["n_split_images"] == 4
    rows = json.loads(per.read_text())
    assert [r["image_id"] for r in rows] == TEST_IDS and rows[0]["BLEU-1"] == pytest.approx(1.0, abs=1e-6)
    assert rows[3]["caption"] == "" and rows[3]["CIDEr-D"] == 0.0
    assert "SPICE    unavailable" in capsys.readouterr().out


def test_bad_predictions_are_one_line_errors(files, tmp_path):
    _, refs, _ = files
    dup = tmp_path / "dup.json"
    dup.write_text(json.dumps([{"image_id": 1, "caption": "a"}, {"image_id": 1, "caption": "b"}]))
    with pytest.raises(CapawareError, match="more than one prediction"):
        load_preds(dup)
    gts = read_references(refs, "test").refs
    with pytest.raises(CapawareError, match="no references"):
        score_captions({99: "a dog"}, gts, meteor=False, spice=False, tokenizer="simple")


def test_without_java_ptb_is_an_error_and_simple_tokenizer_still_scores(files, monkeypatch):
    _, refs, _ = files
    gts = read_references(refs, "test").refs
    monkeypatch.setattr(jv, "java_info", lambda: None)
    with pytest.raises(CapawareError, match="no Java runtime"):
        score_captions(PREDS, gts)
    s = score_captions(PREDS, gts, tokenizer="simple")
    assert s.metrics["METEOR"] is None and s.metrics["SPICE"] is None and s.metrics["CIDEr-D"] > 0
    assert "Java" in s.unavailable["METEOR"] and "Java" in s.unavailable["SPICE"]


@needs_java
def test_doctor_quick(capsys):
    from capaware.doctor import main as doctor

    assert doctor(["--quick", "--corenlp-dir", "/nonexistent"]) == 0
    out = capsys.readouterr().out
    assert "ok      java" in out and "PTB tokenizer" in out and "SPICE models" in out and "fix:" in out


def run_main(args: list[str], capsys) -> tuple[int, str]:
    """The CLI as ``python -m eval.score_captions`` runs it: a CapawareError becomes one line and exit 2."""
    with pytest.raises(SystemExit) as stop:
        run_cli(lambda: main(args))
    return stop.value.code, capsys.readouterr().err.strip()


BAD_REFS = {
    "a results list": [{"image_id": 1, "caption": "a dog"}],
    "sentence without raw or tokens": {"images": [{"cocoid": 1, "split": "test", "sentences": [{"sentid": 0}]}]},
    "image without cocoid or imgid": {"images": [{"split": "test", "sentences": [{"raw": "a dog"}]}]},
    "sentences not a list of objects": {"images": [{"cocoid": 1, "split": "test", "sentences": ["a dog"]}]},
    "annotation without caption": {"annotations": [{"image_id": 1, "id": 3}]},
    "annotation with a text id": {"annotations": [{"image_id": "one", "caption": "a dog"}]},
}


@pytest.mark.parametrize("case", ["unknown image ids", *BAD_REFS])
def test_bad_inputs_are_one_line_errors_naming_the_file(case, files, tmp_path, capsys):
    _, refs, preds = files
    if case == "unknown image ids":  # image 4 is a val image; 99 is nowhere
        preds = tmp_path / "preds.json"
        preds.write_text(json.dumps([{"image_id": 1, "caption": "a dog"}, {"image_id": 4, "caption": "food"},
                                     {"image_id": 99, "caption": "a cat"}]))
        named = preds
    else:
        refs = tmp_path / "refs.json"
        refs.write_text(json.dumps(BAD_REFS[case]))
        named = refs
    code, err = run_main(["--preds", str(preds), "--refs", str(refs), "--split", "test", "--no-meteor",
                          "--no-spice", "--tokenizer", "simple", "--out", str(tmp_path / "m.json")], capsys)
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
    assert err.startswith(f"error: {named}:")
    if case == "unknown image ids":
        assert "2 of 3 predicted image ids are not in split 'test'" in err and "[4, 99]" in err
    assert not (tmp_path / "m.json").exists()


def test_no_java_on_path_is_one_line_and_simple_tokenizer_still_scores(files, tmp_path, capsys, monkeypatch):
    _, refs, preds = files
    args = ["--preds", str(preds), "--refs", str(refs), "--split", "test", "--out", str(tmp_path / "m.json"),
            "--corenlp-dir", str(tmp_path)]
    env = dict(os.environ, PATH=str(tmp_path), PYTHONPATH=str(ROOT), OMP_NUM_THREADS="1")  # no java on PATH
    proc = subprocess.run([sys.executable, "-m", "eval.score_captions", *args], cwd=ROOT, env=env, capture_output=True,
                          text=True)
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert len(proc.stderr.strip().splitlines()) == 1
    assert proc.stderr.strip().startswith("error: java: no Java runtime found on PATH") and "--tokenizer simple" in \
        proc.stderr
    monkeypatch.setenv("PATH", str(tmp_path))
    main([*args, "--tokenizer", "simple"])
    report = json.loads((tmp_path / "m.json").read_text())
    assert report["metrics"]["METEOR"] is None and report["metrics"]["SPICE"] is None
    assert "no Java runtime" in report["unavailable"]["METEOR"] and report["metrics"]["CIDEr-D"] > 0
    assert report["tokenizer"].startswith("simple")


@needs_java
def test_meteor_left_pending_is_scored_once_for_every_run_with_the_same_numbers(files, scored, tmp_path):
    """Issue #55: the pipeline's runs leave METEOR pending (--meteor-later) and its scores stage scores every run in
    one METEOR process (eval.meteor_pending): the numbers equal those of an in-run score (the ``scored`` fixture,
    METEOR in its own process), the per-image file gets its METEOR too, and a second pass finds nothing to do."""
    from eval.meteor_pending import score_pending
    from eval.score_captions import METEOR_PENDING

    _, refs, preds = files
    runs = [tmp_path / "a", tmp_path / "b"]
    other = {i: c[::-1] if i == 2 else c for i, c in PREDS.items()}  # a second run with other captions
    for run, captions in zip(runs, (PREDS, other)):
        run.mkdir()
        (run / "preds_test.json").write_text(json.dumps([{"image_id": i, "caption": c} for i, c in captions.items()]))
        main(["--preds", str(run / "preds_test.json"), "--refs", str(refs), "--split", "test", "--meteor-later",
              "--no-spice", "--out", str(run / "metrics_test.json"), "--per-image", str(run / "per_image_test.json")])
        report = json.loads((run / "metrics_test.json").read_text())
        assert report["metrics"]["METEOR"] is None and report["unavailable"]["METEOR"] == METEOR_PENDING
    started = []
    real_popen = jv.subprocess.Popen
    with pytest.MonkeyPatch.context() as mp:
        mp.setattr(jv.subprocess, "Popen", lambda cmd, **kw: started.append(cmd) or real_popen(cmd, **kw))
        assert score_pending([str(r) for r in runs]) == 2
    assert sum("meteor-1.5.jar" in " ".join(map(str, c)) for c in started) == 1  # one METEOR for both runs
    first = json.loads((runs[0] / "metrics_test.json").read_text())
    assert first["metrics"]["METEOR"] == scored.metrics["METEOR"] and "METEOR" not in first["unavailable"]
    per_image = {r["image_id"]: r["METEOR"] for r in json.loads((runs[0] / "per_image_test.json").read_text())}
    assert per_image == {i: scored.per_image[i]["METEOR"] for i in per_image}
    second = json.loads((runs[1] / "metrics_test.json").read_text())["metrics"]["METEOR"]
    assert second is not None and second != first["metrics"]["METEOR"]
    assert score_pending([str(r) for r in runs]) == 0  # nothing pending any more
