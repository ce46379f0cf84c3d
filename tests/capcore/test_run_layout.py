"""capcore/run_layout.py: one module names a run folder's artifacts; stages leave typed manifests that
eval.reporting.report reads instead of guessing a study's folder and facts from paths and configs."""
import json
import shutil
from pathlib import Path

from capcore.run_layout import (
    CaptionerDir,
    CaptionerManifest,
    RunDir,
    StudyDir,
    StudyManifest,
    read_manifest,
    resolve,
    write_manifest,
)
from eval.reporting.inputs import load_studies


def study_manifest(run: Path, track: str = "layout", sweep: bool = True) -> StudyManifest:
    return StudyManifest(name="s", track=track, study_dir=str(run / "somewhere" / "study"), sweep=sweep,
                         losses={"A 8-D": "log_ratio", "B 8-D": "triplet"},
                         data={"track": track, "format": "lsun", "root": str(run / "data" / "rooms")},
                         query_split="test", db_split="train")


def test_manifest_paths_are_relative_to_the_run_folder_and_survive_a_move(tmp_path):
    run = tmp_path / "run"
    where = RunDir(run)
    where.results("s").mkdir(parents=True)
    write_manifest(where.study_manifest("s"), study_manifest(run), run)
    raw = json.loads(where.study_manifest("s").read_text())
    assert raw["study_dir"] == "somewhere/study" and raw["data"]["root"] == "data/rooms" and raw["kind"] == "stage1"
    moved = tmp_path / "moved"
    shutil.move(run, moved)
    back = read_manifest(RunDir(moved).study_manifest("s"), StudyManifest)
    assert back is not None and resolve(back.study_dir, moved) == moved / "somewhere" / "study"
    outside = CaptionerManifest(stage="xe", core="topdown", features=str(tmp_path / "elsewhere.h5"),
                                refs=str(moved / "r.json"))
    write_manifest(CaptionerDir(moved / "c").manifest, outside, moved)
    got = read_manifest(CaptionerDir(moved / "c").manifest, CaptionerManifest)
    assert got.features == str((tmp_path / "elsewhere.h5").resolve())  # outside the run: kept absolute
    assert resolve(got.refs, moved) == moved / "r.json"


def test_a_manifest_of_another_kind_or_shape_is_not_read(tmp_path):
    path = tmp_path / "manifest.json"
    write_manifest(path, CaptionerManifest(stage="rl", core="att2all2", features="f.h5", refs="r.json"), tmp_path)
    assert read_manifest(path, StudyManifest) is None and read_manifest(path, CaptionerManifest).stage == "rl"
    data = json.loads(path.read_text())
    path.write_text(json.dumps({k: v for k, v in data.items() if k != "core"}))  # a required field missing
    assert read_manifest(path, CaptionerManifest) is None
    path.write_text(json.dumps({**data, "surprise": 1}))  # an unknown field
    assert read_manifest(path, CaptionerManifest) is None
    path.write_text("{not json")
    assert (read_manifest(path, CaptionerManifest) is None
            and read_manifest(tmp_path / "none", CaptionerManifest) is None)


def test_the_report_takes_a_studys_folder_and_facts_from_its_manifest(tmp_path):
    """The rows' npz paths lead nowhere and the title names another track: without the manifest the
    study is not guessed at but named as a problem; with it, the report knows its folder and facts."""
    run = tmp_path / "run"
    study = StudyDir(run / "somewhere" / "study")
    study.retrieval.mkdir(parents=True)
    where = RunDir(run)
    where.results("s").mkdir(parents=True)
    rows = {"Oracle": {"order": 0, "ndcg": [1.0], "file": "/gone/oracle.npz"},
            "Untrained": {"order": 1, "ndcg": [0.3], "file": "/gone/untrained.npz"},
            "A 8-D": {"order": 2, "ndcg": [0.6], "file": "/gone/a.npz"},
            "B 8-D": {"order": 3, "ndcg": [0.5], "file": "/gone/b.npz"}}
    where.retrieval_json("s").write_text(json.dumps({"title": "s (pose track)", "rows": rows}))
    studies, problems = load_studies(run)
    assert (studies == [] and len(problems) == 1 and "no manifest.json" in problems[0]
            and "embedder.rows" in problems[0])
    write_manifest(where.study_manifest("s"), study_manifest(run), run)
    (known,), _ = load_studies(run)
    assert known.run_dir == study.root and known.track == "layout" and known.sweep
    assert known.log_ratio_rows() == ["A 8-D"] and known.data["root"] == str(run / "data" / "rooms")


def test_layout_names_the_files_the_stages_write():
    c = CaptionerDir(Path("r/captioners/x"))
    assert (c.best.name, c.preds("val").name, c.metrics().name, c.attention().name) == \
        ("best.pt", "preds_val.json", "metrics_test.json", "attention_test.h5")
    s = StudyDir(Path("r/pose"))
    assert s.method("lr").model == Path("r/pose/methods/lr/model.pt") and s.items == Path("r/pose/retrieval/items.json")
    assert (RunDir(Path("r")).seed(2).results("x") == Path("r/seeds/s2/results/x")
            and RunDir(Path("r")).seed(0).root == Path("r"))
