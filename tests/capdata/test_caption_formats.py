"""The caption view (capdata/captions.py): COCO's own caption release read with a split file gives the same
images, references, image files and scores as Karpathy's json of the same images (issue #48)."""
from pathlib import Path

import numpy as np
import pytest

from capcore.errors import CapawareError
from capdata.captions import (
    detect_format,
    image_files,
    in_split,
    read_captions,
    read_references,
    references,
    train_splits,
)
from capdata.synthetic.coco_release import generate_coco_release

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def release(tmp_path_factory):
    out = tmp_path_factory.mktemp("release")
    generate_coco_release(out, n_train=12, n_val=4, n_test=6, size=32)
    return out / "coco"


def test_coco_captions_with_a_split_file_read_as_karpathys_json(release):
    karpathy = read_captions(release / "dataset_coco.json")
    coco = read_captions(release / "coco_splits.json", "coco_captions")
    assert detect_format(release / "coco_splits.json") == "coco_captions"
    assert detect_format(release / "dataset_coco.json") == "karpathy"
    assert (karpathy.format, coco.format) == ("karpathy", "coco_captions")  # the records carry their format
    assert train_splits(coco) == train_splits(karpathy) == ("train", "restval")
    order = np.argsort(karpathy.image_ids)  # the split file lists images split by split; the json, as it has them
    back = np.argsort(coco.image_ids)
    assert np.array_equal(karpathy.image_ids[order], coco.image_ids[back])
    assert np.array_equal(karpathy.splits[order], coco.splits[back])
    assert image_files(karpathy) == image_files(coco) and all(p.is_file() for p in image_files(coco).values())
    for split in ("train", "val", "test", "all"):
        assert references(karpathy, split) == references(coco, split)
        assert len(in_split(coco, split)) == len(in_split(karpathy, split))
    tokens = {int(i): c for i, c in zip(karpathy.image_ids, karpathy.captions)}
    assert {int(i): c for i, c in zip(coco.image_ids, coco.captions)} == tokens  # Karpathy's tokenisation


def test_records_keep_their_format_through_selection_and_refuse_without_one(release):
    from capdata.records import select

    coco = read_captions(release / "coco_splits.json")  # found from the file
    part = select(coco, coco.splits == "test")
    assert part.format == "coco_captions" and in_split(part, "test") == list(range(len(part)))
    assert in_split(part, "train") == []  # its training splits are not in the selection
    coco.format = None
    with pytest.raises(CapawareError, match="without a format"):
        in_split(coco, "test")


def test_a_bare_coco_captions_file_is_a_format_of_the_table_without_splits(release, tmp_path):
    from capdata.captions import trainable_formats
    from capdata.formats import FORMATS

    bare = tmp_path / "captions_val2014.json"
    bare.write_text('{"images": [{"id": 7, "file_name": "a.jpg"}, {"id": 3, "file_name": "b.jpg"}], "annotations": ['
                    '{"image_id": 7, "id": 1, "caption": "A red cube."}, {"image_id": 3, "id": 2, "caption": "Two"}]}')
    assert detect_format(bare) == "coco_file" and FORMATS["coco_file"].splits == ()
    records = read_captions(bare)
    assert records.format == "coco_file" and records.image_ids.tolist() == [3, 7]
    assert records.captions[1] == [["a", "red", "cube"]] and records.image_paths[0] == tmp_path / "val2014" / "b.jpg"
    for split in ("test", "val", "all"):  # no splits: every image, whatever split is asked
        assert in_split(records, split) == [0, 1]
    assert read_references(bare, "val") == ({3: ["Two"], 7: ["A red cube."]}, "coco_file", None)
    assert "coco_file" not in trainable_formats() and {"karpathy", "coco_captions"} <= set(trainable_formats())
    other = tmp_path / "other.json"
    other.write_text('{"sentences": []}')
    with pytest.raises(CapawareError, match="neither a caption file"):
        read_references(other)


def test_the_same_predictions_score_the_same_against_either_format(release):
    from eval.score_captions import score_captions

    refs_k, fmt_k, _ = read_references(release / "dataset_coco.json", "test")
    refs_c, fmt_c, _ = read_references(release / "coco_splits.json", "test")
    assert (fmt_k, fmt_c) == ("karpathy", "coco_captions") and refs_k == refs_c
    preds = {i: refs[-1] for i, refs in sorted(refs_k.items())}  # each image's last reference as its caption
    preds[min(preds)] = "a cat on a mat"  # and one wrong one, so the scores are not all perfect
    a = score_captions(preds, refs_k, meteor=False, spice=False).metrics
    b = score_captions(preds, refs_c, meteor=False, spice=False).metrics
    assert a == b and 0 < a["CIDEr-D"]


def test_a_split_file_naming_an_image_without_captions_is_one_line(release, tmp_path):
    import json

    spec = json.loads((release / "coco_splits.json").read_text())
    spec["splits"]["test"].append(999999)
    bad = release / "bad_splits.json"
    bad.write_text(json.dumps(spec))
    with pytest.raises(CapawareError, match=r"bad_splits.json: image 999999 \(test\) has no entry in annotations/"):
        read_captions(bad, "coco_captions")
    with pytest.raises(CapawareError, match="'pose_json' is not a caption format"):
        read_captions(release / "dataset_coco.json", "pose_json")


def test_no_module_reads_a_caption_file_but_through_the_caption_view():
    """The literal-format calls and the hand-written Karpathy parsers are gone from the product."""
    import subprocess

    call = "read_annotation(" '"karpathy"'  # split, so that this file is not a match itself
    out = subprocess.run(["grep", "-rn", call, "--include=*.py", "--exclude-dir=.venv", "."], cwd=ROOT,
                         capture_output=True, text=True)
    assert out.stdout == ""
    product = ("capaware", "capcore", "captioners", "embedder", "joint", "feature_extract", "rl", "eval", "scripts",
               "studies")
    parsers = [f"{p.relative_to(ROOT)}" for pkg in product for p in (ROOT / pkg).rglob("*.py")
               if '["sentences"]' in p.read_text() or 'get("sentences"' in p.read_text()]
    assert parsers == []


def test_outside_capdata_no_product_module_spells_a_caption_format_or_reads_a_caption_file():
    """Issue #58: formats are asked of the table (capdata.formats) and the records, never compared or defaulted by
    name, and caption files are read by capdata alone: no string "karpathy", "coco_captions" or "coco" in the
    product's code outside capdata, no caption reader imported, no caption file's keys looked up."""
    import ast

    from capdata.formats import formats_of

    names = {*formats_of("caption"), "coco"}  # every caption format of the table (coco_file too), and "coco"
    product = ("capaware", "capcore", "captioners", "embedder", "joint", "feature_extract", "rl", "eval")
    spelled, reads = [], []
    for path in (p for pkg in product for p in sorted((ROOT / pkg).rglob("*.py"))):
        tree = ast.parse(path.read_text())
        where = path.relative_to(ROOT)
        spelled += [f"{where}:{n.lineno}" for n in ast.walk(tree)
                    if isinstance(n, ast.Constant) and n.value in names]
        reads += [f"{where}:{n.lineno} imports {n.module}" for n in ast.walk(tree) if isinstance(n, ast.ImportFrom)
                  and n.module in ("capdata.readers.karpathy", "capdata.readers.coco_captions")]
        keys = [n.slice for n in ast.walk(tree) if isinstance(n, ast.Subscript)]  # x["images"], x.get("images")
        keys += [n.args[0] for n in ast.walk(tree) if isinstance(n, ast.Call) and n.args
                 and isinstance(n.func, ast.Attribute) and n.func.attr == "get"]
        reads += [f"{where}:{k.lineno} looks up {k.value!r}" for k in keys
                  if isinstance(k, ast.Constant) and k.value in ("sentences", "annotations", "imgid", "cocoid")]
    assert spelled == [] and reads == [], spelled + reads


@pytest.mark.parametrize("annotation, fmt, title", [("dataset_coco.json", "karpathy", "Karpathy test split"),
                                                    ("coco_splits.json", "coco_captions", "COCO-format test split")])
def test_the_scoring_command_records_the_split_of_every_format_so_table1_finds_g_and_d(release, tmp_path,
                                                                                       annotation, fmt, title):
    """The command the pipeline's XE and SCST stages run (capaware/stage.py), on either format: the metrics file
    names its split and format, so Table 1 reads G and D from grounding_test.json beside it and its heading names
    the split (issue #58: a COCO-format run once recorded split None and looked for grounding_None.json)."""
    import json

    from eval import score_captions
    from eval.reporting.results_table import read_grounding, split_title

    refs = read_references(release / annotation, "test", fmt).refs
    preds = tmp_path / "preds_test.json"
    preds.write_text(json.dumps([{"image_id": i, "caption": r[-1]} for i, r in sorted(refs.items())]))
    metrics = tmp_path / "metrics_test.json"
    score_captions.main(["--preds", str(preds), "--refs", str(release / annotation), "--format", fmt,
                         "--split", "test", "--out", str(metrics), "--no-meteor", "--no-spice",
                         "--tokenizer", "simple"])
    report = json.loads(metrics.read_text())
    assert (report["split"], report["caption_format"], report["n_split_images"]) == ("test", fmt, len(refs))
    (tmp_path / "grounding_test.json").write_text(json.dumps({"ratio_real_shuffled": 3.25,
                                                              "distinct_fraction_real": 0.5}))
    assert read_grounding(metrics, report["split"])["G"] == 3.25
    assert split_title({"split": report["split"], "caption_format": report["caption_format"]}) == title


def test_the_rehearsal_outside_a_checkout_is_one_line_and_writes_nothing(tmp_path, monkeypatch):
    """A plain `pip install .` has no configs/ (issue #58: a traceback and a half-written tree before)."""
    import capdata.synthetic.coco_release as coco_release

    installed = tmp_path / "site-packages" / "configs" / "paper" / "pipeline_coco.yaml"  # what a plain install has
    monkeypatch.setattr(coco_release, "PIPELINE", installed)
    with pytest.raises(CapawareError, match="configs/ ships with the checkout") as err:
        coco_release.generate_coco_release(tmp_path / "rehearsal")
    assert "git clone" in err.value.fix and not (tmp_path / "rehearsal").exists()
