"""eval.reporting.results_table: Table 1 layout from fake runs (metrics JSON + preds meta + tiny feats.h5 with the
attributes stage two writes). Row labels must come from the files, not from folder names."""
import csv
import json
from pathlib import Path

import h5py
import numpy as np
import pytest

from capcore.errors import CapawareError, run_cli
from eval.reporting.results_table import build_table, main, markdown

ROOT = Path(__file__).resolve().parents[2]

SPICE_WHY = "Stanford CoreNLP 3.6.0 models not found; copy the jars"


def write_features(path, backbone, method=""):
    with h5py.File(path, "w") as f:
        f.create_dataset("att", data=np.zeros((2, 1, 2), np.float16))
        f.create_dataset("fc", data=np.zeros((2, 2), np.float16))
        f.create_dataset("image_id", data=np.arange(2))
        f.attrs.update(format="capaware-features/1", backbone=backbone, backbone_method=method, complete=True)
    return path


SIGNATURE = "Standard_wInit+Cider-D[n4,s6]+average[nspi5]+df[train@0123abcd]+xe[1]+t[0.5]"


def write_run(run, core, features, cider, stage=None, beam=2, meteor=0.25, meta_core=True, name="test"):
    """What scripts/stage3_captioners.sh leaves in a run folder (only the files the table reads)."""
    run.mkdir(parents=True, exist_ok=True)
    preds = run / f"preds_{name}.json"
    preds.write_text(json.dumps([{"image_id": 0, "caption": "a dog"}, {"image_id": 1, "caption": "a cat"}]))
    meta = {"checkpoint": str(run / "best.pt"), "config_hash": f"hash-{core}", "split": "test", "method": "beam",
            "beam_size": beam, "features": str(features), "n_images": 2}
    if meta_core:
        meta["core"] = core
    if stage:
        meta["stage"] = stage
    (run / f"preds_{name}.meta.json").write_text(json.dumps(meta))
    metrics = {"BLEU-1": 0.7, "BLEU-2": 0.5, "BLEU-3": 0.4, "BLEU-4": 0.3, "METEOR": meteor, "ROUGE-L": 0.55,
               "CIDEr-D": cider, "SPICE": None}
    unavailable = {"SPICE": SPICE_WHY, **({} if meteor is not None else {"METEOR": "no Java runtime"})}
    (run / f"metrics_{name}.json").write_text(json.dumps({
        "metrics": metrics, "unavailable": unavailable, "notes": [], "n_images": 2, "n_split_images": 2,
        "split": "test", "preds": str(preds), "refs": "refs.json", "config_hash": f"hash-{core}",
        "scst_signature": SIGNATURE if stage == "rl" else None,
        "discriminativeness": {"bad_endings": 0.25 if stage == "rl" else 0.0},
        "command": "python -m eval.score_captions ..."}))
    return run


@pytest.fixture
def feats(tmp_path):
    d = tmp_path / "features"
    d.mkdir()
    return {"img": write_features(d / "img.h5", "class-pretrained"),
            "cap": write_features(d / "cap.h5", "metric-learning", "L(Log-ratio)+M(Dense)"),
            "imagenet": write_features(d / "imagenet.h5", "imagenet"),
            "odd": write_features(d / "odd.h5", "my-own-net")}


def test_rows_in_table1_order_labelled_from_the_feature_files(tmp_path, feats, monkeypatch, capsys):
    runs = tmp_path / "runs"
    # folder names lie on purpose: the features attribute decides Img / Cap, the meta decides the model
    given = [write_run(runs / "img_topdown", "topdown", feats["cap"], 1.10),
             write_run(runs / "a", "att2all2", feats["cap"], 1.05),
             write_run(runs / "cap_topdown", "topdown", feats["imagenet"], 1.09),
             write_run(runs / "rl", "att2all2", feats["img"], 1.13, stage="rl"),
             write_run(runs / "b", "att2all2", feats["img"], 1.03)]
    monkeypatch.chdir(tmp_path)
    main([str(r) for r in given] + ["--out", "results/captioning"])
    out = tmp_path / "results" / "captioning"

    table = json.loads((out / "captioning.json").read_text())
    keys = [(r["model"], r["features"], r["training"], r["C"]) for r in table["rows"]]
    assert keys == [("Att2all2", "Img", "XE", 1.03), ("Att2all2", "Img", "RL", 1.13), ("Att2all2", "Cap", "XE", 1.05),
                    ("Top-Down", "Img", "XE", 1.09), ("Top-Down", "Cap", "XE", 1.10)]
    first = table["rows"][0]
    assert first["metrics_file"] == "runs/b/metrics_test.json" and first["backbone"] == "class-pretrained"
    assert (first["B4"], first["M"], first["R"], first["S"]) == (0.3, 0.25, 0.55, None)
    assert first["decoding"] == "beam 2" and first["config_hash"] == "hash-att2all2"
    assert table["rows"][2]["backbone_method"] == "L(Log-ratio)+M(Dense)"
    assert table["command"].startswith("python -m eval.reporting.results_table")

    md = (out / "captioning.md").read_text()
    assert md == capsys.readouterr().out.split("-> ")[0]  # printed as written
    body = [line for line in md.splitlines() if line.startswith("| ") and "---" not in line][1:]
    cells = [[c.strip() for c in line.strip("|").split("|")] for line in body]
    assert [c[:3] for c in cells] == [["Att2all2", "Img", "XE"], ["", "", "RL"], ["", "Cap", "XE"],
                                      ["Top-Down", "Img", "XE"], ["", "Cap", "XE"]]  # merged cells, as the paper
    assert cells[0][3:8] == ["0.3000", "1.030", "0.2500", "0.5500", "n/a"]
    assert cells[0][-1] == "`runs/b/metrics_test.json`"
    assert cells[0][-2] == "—" and cells[1][-2] == f"`{SIGNATURE}`"  # the signature of the RL row only
    assert cells[0][10] == "0.00" and cells[1][10] == "0.25"  # E, bad endings
    assert table["rows"][1]["signature"] == SIGNATURE and table["rows"][1]["E"] == 0.25
    assert f"S (SPICE) n/a: {SPICE_WHY}" in md

    rows = list(csv.DictReader((out / "captioning.csv").open()))
    assert [(r["model"], r["features"], r["training"]) for r in rows] == [k[:3] for k in keys]
    assert rows[0]["S"] == "n/a" and float(rows[0]["C"]) == 1.03
    assert rows[0]["metrics_file"] == "runs/b/metrics_test.json"


def test_self_retrieval_columns_appear_beside_unique_and_novel_when_a_run_has_them(tmp_path, feats):
    plain = write_run(tmp_path / "xe", "att2all2", feats["img"], 1.0)
    rows, notes = build_table([plain])
    assert "SR1" not in markdown(rows, notes)  # no joint stage: no text-side columns
    sr = write_run(tmp_path / "rl", "att2all2", feats["img"], 1.1, stage="rl")
    metrics = json.loads((sr / "metrics_test.json").read_text())
    metrics["discriminativeness"].update(unique_captions=0.75, novel_captions=0.5)
    (sr / "metrics_test.json").write_text(json.dumps(metrics))
    (sr / "self_retrieval_test.json").write_text(json.dumps({"r1": 22.0, "r5": 69.5, "r10": 86.0}))
    rows, notes = build_table([plain, sr])
    md = markdown(rows, notes)
    head = next(line for line in md.splitlines() if line.startswith("| Model"))
    cells = [c.strip() for c in head.strip("|").split("|")]
    assert cells[cells.index("E") + 1:cells.index("E") + 6] == ["U", "N", "SR1", "SR5", "SR10"]
    body = [[c.strip() for c in line.strip("|").split("|")] for line in md.splitlines()
            if line.startswith("| ") and "---" not in line][1:]
    at = cells.index("SR1")
    assert body[0][at:at + 3] == ["n/a"] * 3 and body[1][at - 2:at + 3] == ["0.75", "0.50", "22.0", "69.5", "86.0"]
    assert "self-retrieval R@1 / 5 / 10 in percent" in md


def test_unavailable_custom_mixed_decoding_and_duplicates_are_noted(tmp_path, feats):
    a = write_run(tmp_path / "a", "topdown", feats["odd"], 0.9, meteor=None)
    b = write_run(tmp_path / "b", "topdown", feats["img"], 1.0, beam=1)
    write_run(b, "topdown", feats["img"], 1.01, beam=1, name="val")  # a second metrics file in one folder: two rows
    rows, notes = build_table([a, b])
    assert [(r["features"], r["decoding"], r["C"]) for r in rows] == [("Img", "greedy", 1.0), ("Img", "greedy", 1.01),
                                                                       ("Custom", "beam 2", 0.9)]
    assert rows[2]["M"] is None and rows[2]["backbone"] == "my-own-net"
    text = "\n".join(notes)
    assert "M (METEOR) n/a: no Java runtime" in text and "rows differ in decoding (beam 2, greedy)" in text
    assert "Top-Down / Img / XE appears more than once" in text and "Custom:" in text


def test_scored_runs_beside_the_tabled_ones_are_named_not_dropped_silently(tmp_path, feats, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "run" / "captioners"
    tabled = [write_run(runs / f"{k}_topdown", "topdown", feats[k], 1.0) for k in ("img", "cap")]
    (runs / "unscored").mkdir()  # no metrics: nothing to table
    left_out = lambda notes: [n for n in notes if n.startswith("not in this table")]  # noqa: E731
    assert left_out(build_table(tabled)[1]) == []
    write_run(runs / "img_transformer", "transformer", feats["img"], 0.9)  # another pipeline config's run
    write_run(runs / "cap_transformer", "transformer", feats["cap"], 0.9)
    assert left_out(build_table(tabled)[1]) == [
        "not in this table: 2 other scored run(s) in run/captioners (cap_transformer, img_transformer); "
        "python -m eval.reporting.results_table run/captioners/*/metrics_*.json --out DIR tables them all"]
    rows, notes = build_table(sorted(runs.glob("*/metrics_*.json")))  # the note's command tables every scored run
    assert len(rows) == 4 and left_out(notes) == []


def test_an_older_meta_without_core_uses_the_config_next_to_the_checkpoint(tmp_path, feats):
    run = write_run(tmp_path / "run", "ignored", feats["cap"], 1.0, meta_core=False)
    (run / "config.yaml").write_text("name: x\nmodel:\n  core: topdown\n")
    rows, _ = build_table([run / "metrics_test.json"])
    assert (rows[0]["model"], rows[0]["features"]) == ("Top-Down", "Cap")
    (run / "config.yaml").unlink()
    with pytest.raises(CapawareError, match="names no model core"):
        build_table([run])


def test_problems_are_one_line_errors_naming_the_file(tmp_path, feats, capsys):
    def cli(*args):
        with pytest.raises(SystemExit) as stop:
            run_cli(lambda: main([*map(str, args), "--out", str(tmp_path / "out")]))
        err = capsys.readouterr().err.strip()
        assert stop.value.code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err
        return err

    empty = tmp_path / "empty"
    empty.mkdir()
    assert cli(empty).startswith(f"error: {empty}: no metrics_*.json")
    assert "no such run folder" in cli(tmp_path / "nowhere")
    gone = write_features(tmp_path / "gone.h5", "metric-learning")
    run = write_run(tmp_path / "run", "att2all2", gone, 1.0)
    gone.unlink()
    assert cli(run).startswith(f"error: {gone}: features file named by the predictions' meta not found")
    (run / "metrics_test.json").write_text(json.dumps({"score": 1}))
    assert cli(run).startswith(f"error: {run / 'metrics_test.json'}: not an eval.score_captions metrics file")
    (run / "metrics_test.json").write_text("{")
    assert "not valid JSON" in cli(run)
    assert not (tmp_path / "out").exists()


def test_every_core_has_a_display_name():
    from captioners.core_registry import CORES, display_name

    assert [display_name(c) for c in CORES] == ["Att2all2", "Top-Down", "Transformer"]
    assert display_name("an_old_core") == "an_old_core"  # a run of a core not registered here shows as named


def test_the_metric_legend_is_written_once():
    """Table 1, the report and the seeds table print one legend, from eval/reporting/columns.py; no other module
    of the product or its scripts spells a metric's description out again."""
    import ast

    from eval.reporting import columns

    phrases = [c.legend for c in columns.BESIDE] + ["B4 BLEU-4", "(fractions, as", "as the paper prints"]
    found = []
    for path in sorted([*ROOT.glob("eval/**/*.py"), *ROOT.glob("scripts/**/*.py"), *ROOT.glob("studies/**/*.py"),
                        *ROOT.glob("captioners/**/*.py")]):
        if path.name == "columns.py":
            continue
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Constant) and isinstance(node.value, str):
                found += [f"{path.relative_to(ROOT)}:{node.lineno}" for p in phrases if p[:40] in node.value]
    assert found == [], found
    text = columns.legend()
    assert text.startswith("B4 BLEU-4, C CIDEr-D, M METEOR, R ROUGE-L, S SPICE (fractions, as in the paper). Img: ")
    assert all(f"{c.key}: {c.legend}" in text for c in columns.BESIDE) and text.endswith("(rl/signature.py).")
