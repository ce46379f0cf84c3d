"""The ``capaware`` command and the one-file model: export, caption, bad input, help.

The chain is real and tiny: synthetic caption images (64 px) -> stage-two features from a resnet18
backbone checkpoint (float16 storage, precision auto) -> a 1-epoch XE captioner -> ``capaware export``
-> ``capaware caption`` on the same image files, against ``captioners.predict`` on ``feats.h5``.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch

from capaware.cli import COMMANDS, main as cli_main
from capaware.model_file import FORMAT, read_model_file
from capcore.errors import CapawareError
from tests.image_zoo import bad_images, good_images
from tests.feature_extract.test_features import write_checkpoint

ROOT = Path(__file__).resolve().parents[2]
pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def trained(tmp_path_factory):
    """(root, captioner run folder, the test images' paths by id, feats.h5)."""
    from capdata.synthetic import generate_captions
    from captioners.config import load_captioner_config
    from captioners.xe import train as xe_train
    from feature_extract.config import load_features_config
    from feature_extract.dump import dump

    root = tmp_path_factory.mktemp("capaware")
    json_path = generate_captions(root / "data", n_train=24, n_test=6, seed=0, size=64, n_val=4)
    backbone = write_checkpoint(root / "backbone.pt", kind="class-pretrained", normalised=False)
    feats = root / "feats.h5"
    dump(load_features_config(None, [f"backbone.checkpoint={backbone}", f"images.captions={json_path}",
                                     f"out={feats}", "input.size=64", "att_size=2", "batch_size=4",
                                     "num_workers=0", "dtype=float16", "precision=auto"]), "test", progress=False)
    cfg = load_captioner_config(ROOT / "configs/demo/demo_topdown.yaml", [
        f"data.json={json_path}", f"data.prepro_dir={root / 'prep'}", "data.word_count_threshold=1",
        f"data.features={feats}", "val.batch_size=4", f"out_dir={root / 'xe'}", "model.rnn_size=16",
        "model.input_encoding_size=12", "model.att_hid_size=8", "model.drop_prob_lm=0.0", "train.batch_size=4",
        "train.epochs=4", "train.lr=5e-3", "train.precision=float32"])  # captions that differ between images
    xe_train(cfg, progress=False)
    data = json.loads(json_path.read_text())
    tests = {im["cocoid"]: json_path.parent / im["filepath"] / im["filename"]
             for im in data["images"] if im["split"] == "test"}
    return root, root / "xe", tests, feats


@pytest.fixture(scope="module")
def model_file(trained):
    root, run, _, _ = trained
    assert cli_main(["export", str(run), "-o", str(root / "model.capaware")]) == 0
    return root / "model.capaware"


def test_export_is_one_self_describing_file(trained, model_file):
    _, run, _, feats = trained
    m = read_model_file(model_file)
    best = torch.load(run / "best.pt", weights_only=True)
    assert list(m.card.vocab) == list(best["vocab"]) and m.card.core == "topdown"
    assert all(torch.equal(m.captioner_state[k], best["model"][k]) for k in best["model"])
    prep = m.preprocessing
    with h5py.File(feats, "r") as f:
        assert (prep.input_size, prep.att_size, prep.feature_dtype) == (64, 2, "float16")
        assert m.provenance["backbone_sha256"] == f.attrs["checkpoint_sha256"]
    assert (prep.arch, prep.layer, prep.input_policy) == ("resnet18", "layer4", "square")
    assert m.decoding == {"method": "beam", "beam_size": 2, "max_length": m.card.max_length}
    assert m.provenance["val_cider"] == pytest.approx(best["val_cider"])
    assert torch.load(model_file, weights_only=True)["format"] == FORMAT
    from capaware.export import best_checkpoint  # a pipeline run folder: its best captioner on val
    (trained[0] / "run" / "captioners").mkdir(parents=True)
    for name, score in (("a", 0.2), ("b", 0.5), ("c", 0.1)):
        (trained[0] / "run" / "captioners" / name).mkdir()
        torch.save({"val_cider": score}, trained[0] / "run" / "captioners" / name / "best.pt")
    assert best_checkpoint(trained[0] / "run") == trained[0] / "run" / "captioners" / "b" / "best.pt"
    from capaware.export import trained_on  # real captions carry no note; nor does a json that is not there
    (trained[0] / "real.json").write_text(json.dumps({"images": [], "dataset": "coco"}))
    assert trained_on(trained[0] / "real.json") == {} and trained_on(trained[0] / "nowhere.json") == {}


def test_caption_gives_decodes_captions_from_the_same_features(trained, model_file, tmp_path, capsys):
    """From the image files: the features equal feats.h5's rows bit for bit, so the captions equal
    captioners.predict's on feats.h5 (same beam)."""
    from capaware import ImageCaptioner
    from captioners.predict import main as predict_main

    _, run, tests, feats = trained
    ids = sorted(tests)
    captioner = ImageCaptioner.load(model_file)
    got = list(captioner.run([tests[i] for i in ids], batch_size=4))
    predict_main(["--checkpoint", str(run / "best.pt"), "--split", "test", "--out", str(tmp_path / "p.json"),
                 "--beam-size", "2", "--no-progress"])
    expected = {r["image_id"]: r["caption"] for r in json.loads((tmp_path / "p.json").read_text())}
    assert [c.caption for c in got] == [expected[i] for i in ids]
    with h5py.File(feats, "r") as f:  # the features themselves, row by row
        rows = [int(np.flatnonzero(f["image_id"][:] == i)[0]) for i in ids]
        want_att = torch.from_numpy(f["att"][rows].astype(np.float32))
        want_fc = torch.from_numpy(f["fc"][rows].astype(np.float32))
    fc, att = captioner.features([tests[i] for i in ids], batch_size=4)
    assert torch.equal(att, want_att) and torch.equal(fc, want_fc)
    assert captioner.caption([tests[i] for i in ids], batch_size=4) == [c.caption for c in got]

    out = tmp_path / "preds.json"
    capsys.readouterr()
    assert cli_main(["caption", "--model", str(model_file), *map(str, (tests[i] for i in ids)), "--out", str(out),
                     "--batch-size", "4", "--no-progress"]) == 0
    printed = capsys.readouterr()
    lines = [ln.split("\t") for ln in printed.out.strip().splitlines()]
    assert [(Path(p), c) for p, c in lines] == [(tests[i], expected[i]) for i in ids]
    from capdata.synthetic.drawing import SHAPES_WORLD  # trained on the embedded default: the user is told so
    assert f"note: this model learned from {SHAPES_WORLD}" in printed.err.splitlines()
    assert read_model_file(model_file).provenance["synthetic_data"] == SHAPES_WORLD
    assert not [ln for ln in printed.err.splitlines() if "image ids" in ln]  # every name has its own id: no note
    rows = json.loads(out.read_text())
    # ids from the file names' trailing digits (COCO_val2014_000000391895.jpg -> 391895)
    assert [(r["image_id"], r["caption"]) for r in rows] == [(int(tests[i].stem.split("_")[-1]), expected[i])
                                                             for i in ids]
    assert len(set(expected.values())) > 1  # the captions follow the images: their equality is not trivial


def test_pil_images_and_attention_overlays(trained, model_file, tmp_path, capsys):
    from PIL import Image

    from capaware import ImageCaptioner

    _, _, tests, _ = trained
    paths = [tests[i] for i in sorted(tests)][:2]
    captioner = ImageCaptioner.load(model_file)
    assert captioner.caption([Image.open(p) for p in paths]) == captioner.caption(paths)
    one = captioner.caption(str(paths[0]))  # one path (issue #65: a str had been captioned as its characters)
    assert isinstance(one, str) and one == captioner.caption([str(paths[0])])[0]
    assert captioner.caption(paths[0]) == one and captioner.caption(Image.open(paths[0])) == one
    assert [c.source for c in captioner.run(str(paths[0]))] == [str(paths[0])]
    assert captioner.features(paths[0])[0].shape[0] == 1
    rows = list(captioner.run(paths, attention=True))
    for c in rows:
        assert c.attention.shape == (len(c.caption.split()), 4)
        assert np.allclose(c.attention.sum(1), 1, atol=1e-4)  # a distribution over the 2 x 2 grid per word
    assert cli_main(["caption", "--model", str(model_file), *map(str, paths), "--attention", str(tmp_path / "att"),
                     "--no-progress"]) == 0
    pngs = sorted((tmp_path / "att").glob("*.png"))
    assert len(pngs) == 2 and all(Image.open(p).size[0] > 100 for p in pngs)


def test_captioning_reads_the_model_file_alone(trained, model_file, tmp_path, monkeypatch):
    """A copied .capaware captions with no HDF5 file and no checkpoint of the run opened."""
    import shutil

    import h5py as h5

    from capaware import ImageCaptioner
    from capcore import checkpoint

    _, _, tests, _ = trained
    paths = [tests[i] for i in sorted(tests)][:3]
    expected = ImageCaptioner.load(model_file).caption(paths)
    copy = tmp_path / "shared.capaware"
    shutil.copy(model_file, copy)

    def refuse(*args, **kwargs):
        raise AssertionError(f"captioning opened a run file: {args[:1]}")
    monkeypatch.setattr(h5, "File", refuse)
    monkeypatch.setattr(checkpoint, "load_checkpoint", refuse)
    assert ImageCaptioner.load(copy).caption(paths) == expected


def test_users_folder_with_odd_and_bad_files(trained, model_file, tmp_path, capsys):
    folder = tmp_path / "mine"
    good = good_images(folder)
    bad = bad_images(folder / "bad")
    args = ["caption", "--model", str(model_file), str(folder), "--no-progress"]
    with pytest.raises(CapawareError, match="--ids positions"):  # --ids names (scoring): names with and without
        cli_main(args + ["--ids=names"])                          # an id are refused, not guessed
    with pytest.raises(CapawareError, match="--skip-bad") as err:  # stops at the first bad file, named
        cli_main(args)
    assert err.value.where in {str(p) for p in bad.values()} and "skip_bad=True" not in str(err.value)
    capsys.readouterr()
    assert cli_main(args + ["--skip-bad", "--out", str(tmp_path / "p.json")]) == 1
    captured = capsys.readouterr()
    captioned = {Path(ln.split("\t")[0]) for ln in captured.out.strip().splitlines()}
    assert captioned == set(good.values())
    assert f"skipped {len(bad)} file(s)" in captured.err and all(str(p) in captured.err for p in bad.values())
    assert len(json.loads((tmp_path / "p.json").read_text())) == len(good)
    empty = tmp_path / "empty"
    empty.mkdir()
    with pytest.raises(CapawareError, match="no image files"):
        cli_main(["caption", "--model", str(model_file), str(empty)])


def test_a_folder_of_any_names_is_captioned_with_positions_and_one_note(trained, model_file, tmp_path, capsys):
    """Issue #65: a new user's folder mixes names with and without trailing digits (scan16.png, phone.jpg, and two
    shapes images named by their ids): every image is captioned, --out numbers them 0..n-1 in the order captioned,
    and one line says why. A folder of names that all end in distinct digits keeps them as ids, without a note."""
    import shutil

    from capaware import ImageCaptioner

    _, _, tests, _ = trained
    folder = tmp_path / "good"
    good_images(folder)
    coco = tmp_path / "coco"
    coco.mkdir()
    shapes = [tests[i] for i in sorted(tests)][:2]
    for path in shapes:
        shutil.copy(path, folder / path.name)
        shutil.copy(path, coco / path.name)
    everything = sorted(p for p in folder.iterdir())
    capsys.readouterr()
    out = tmp_path / "p.json"
    assert cli_main(["caption", "--model", str(model_file), str(folder), "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    lines = [ln.split("\t") for ln in printed.out.strip().splitlines()]
    assert [Path(p) for p, _ in lines] == everything and all(c for _, c in lines)
    notes = [ln for ln in printed.err.splitlines() if "image ids" in ln]
    n = len(everything)
    assert notes == [f"note: 3 of {n} image names end in digits and {n - 3} do not: --out gives positions 0-{n - 1} as "
                     "image ids (name every image by its id, as COCO_val2014_000000391895.jpg, to keep COCO's ids)"]
    rows = json.loads(out.read_text())
    assert [(r["image_id"], Path(r["file_name"])) for r in rows] == list(enumerate(everything))
    captioner = ImageCaptioner.load(model_file)  # the copies are captioned as their originals
    assert [r["caption"] for r in rows if Path(r["file_name"]).name in {p.name for p in shapes}] == \
        captioner.caption(shapes)

    assert cli_main(["caption", "--model", str(model_file), str(coco), "--no-progress", "--out", str(out)]) == 0
    printed = capsys.readouterr()
    assert not [ln for ln in printed.err.splitlines() if "image ids" in ln]
    assert [r["image_id"] for r in json.loads(out.read_text())] == [int(p.stem) for p in shapes]
    with pytest.raises(CapawareError, match="3 image names end in digits .* and 5 do not"):  # --ids names: refused
        cli_main(["caption", "--model", str(model_file), str(folder), "--ids", "names"])


def test_image_ids_by_ids_choice():
    """``--ids``' rule without a model: auto keeps distinct trailing digits, else positions, with a note only
    where names carried ids that were given up."""
    from capaware.caption_cli import image_ids

    coco = [Path("v/COCO_val2014_000000391895.jpg"), Path("v/COCO_val2014_000000522418.jpg")]
    assert image_ids(coco, "auto") == ([391895, 522418], "")
    assert image_ids(coco, "names") == ([391895, 522418], "")
    assert image_ids(coco, "positions") == ([0, 1], "")
    assert image_ids([Path("a/cat.png"), Path("a/dog.jpg")], "auto") == ([0, 1], "")  # no id given up: no note
    ids, note = image_ids([Path("x/img_7.jpg"), Path("x/photo_007.png"), Path("x/img_8.jpg")], "auto")
    assert ids == [0, 1, 2] and note.startswith("note: img_7.jpg and photo_007.png end in the same number: --out "
                                                "gives positions 0-2 as image ids")
    with pytest.raises(CapawareError, match="end in the same number"):
        image_ids([Path("x/img_7.jpg"), Path("x/photo_007.png")], "names")


def test_python_errors_name_python_arguments_and_the_command_its_flags(trained, model_file, tmp_path, capsys):
    """Issue #65: ImageCaptioner's errors name skip_bad, beam_size and batch_size, never a command-line flag;
    ``capaware caption`` checks --beam and --batch-size itself and names --skip-bad."""
    from capaware import ImageCaptioner

    _, _, tests, _ = trained
    bad = bad_images(tmp_path / "bad")["not_image"]
    captioner = ImageCaptioner.load(model_file)
    with pytest.raises(CapawareError) as err:
        captioner.caption([tests[min(tests)], bad])
    said = str(err.value)
    assert err.value.where == str(bad) and "skip_bad=True" in said and "--" not in err.value.fix
    rows = list(captioner.run([bad, tests[min(tests)]], skip_bad=True))
    assert rows[0].error and rows[1].caption == captioner.caption(tests[min(tests)])
    for kwargs in ({"beam_size": 0}, {"batch_size": 0}):
        with pytest.raises(CapawareError, match="beam_size .* and batch_size .* must be >= 1") as err:
            captioner.caption(tests[min(tests)], **kwargs)
        assert "--" not in str(err.value)
    for flag in ("--beam", "--batch-size"):
        with pytest.raises(SystemExit) as stop:  # argparse's usage error, naming the flag
            cli_main(["caption", "--model", str(model_file), str(tests[min(tests)]), flag, "0"])
        assert stop.value.code == 2 and f"argument {flag}: must be >= 1, got 0" in capsys.readouterr().err


def test_truncated_foreign_and_other_version_model_files_are_refused(trained, model_file, tmp_path):
    data = model_file.read_bytes()
    cut = tmp_path / "cut.capaware"
    cut.write_bytes(data[: len(data) // 2])
    with pytest.raises(CapawareError, match="truncated"):
        read_model_file(cut)
    with pytest.raises(CapawareError, match="not a capaware model file"):
        read_model_file(trained[1] / "best.pt")
    notes = tmp_path / "notes.capaware"
    notes.write_text("model: the one from the demo\n")  # a text file given as --model: not called damaged
    for bad, what in ((notes, r"\(text, not a torch archive\)"), (tmp_path / "cut.capaware", "truncated")):
        with pytest.raises(CapawareError, match=what) as err:
            read_model_file(bad)
        assert ("truncated" in err.value.problem) == (bad == cut)
    raw = torch.load(model_file, weights_only=True)
    raw["version"] = 99
    torch.save(raw, tmp_path / "future.capaware")
    with pytest.raises(CapawareError, match="version 99; this capaware reads version 1"):
        read_model_file(tmp_path / "future.capaware")


def test_every_command_has_help_with_an_example_and_errors_are_one_line(tmp_path, capsys):
    for name, command in COMMANDS.items():
        try:
            status = cli_main([name, "--help"])
        except SystemExit as stop:  # argparse's --help
            status = stop.code
        out = capsys.readouterr().out
        assert status == 0 and f"example: {command.example}" in out and "usage:" in out, name
    env = dict(os.environ, PYTHONPATH=str(ROOT))  # the real entry point: status and stderr as a user sees them
    top = subprocess.run([sys.executable, "-m", "capaware", "--help"], capture_output=True, text=True, env=env)
    assert top.returncode == 0 and all(name in top.stdout for name in COMMANDS)
    bad = subprocess.run([sys.executable, "-m", "capaware", "caption", "--model", str(tmp_path / "none.capaware"),
                          str(ROOT / "README.md")], capture_output=True, text=True, env=env)
    assert bad.returncode == 2 and bad.stderr.strip().count("\n") == 0 and "Traceback" not in bad.stderr
    assert "none.capaware: model file not found" in bad.stderr
    unknown = subprocess.run([sys.executable, "-m", "capaware", "fly"], capture_output=True, text=True, env=env)
    assert unknown.returncode == 2 and "unknown command 'fly'" in unknown.stderr


def test_run_takes_config_and_run_folder_from_the_users_directory(tmp_path, monkeypatch):
    """The pipeline runs in the checkout; what the user typed is resolved where the user is."""
    from capaware.cli import from_here

    monkeypatch.chdir(tmp_path)
    (tmp_path / "mine.yaml").write_text("name: mine\n")
    args = from_here(["mine.yaml", "--run", "out/run", "--from", "features"], config_first=True)
    assert args == [str(tmp_path / "mine.yaml"), "--run", str(tmp_path / "out" / "run"), "--from", "features"]
    shipped = "configs/paper/pipeline_coco.yaml"  # not here: left for the checkout, where it is
    assert from_here([shipped], config_first=True) == [shipped]
    assert from_here(["--run", "r"], config_first=False) == ["--run", str(tmp_path / "r")]


def test_the_pipeline_runs_in_the_checkout_or_else_where_the_user_is(tmp_path, monkeypatch):
    """An editable install runs the pipeline in its checkout (the shipped configs name files from there); a plain
    install, whose package folder holds no configs, in the user's directory; `capaware demo` needs a checkout."""
    from capaware import cli

    monkeypatch.chdir(tmp_path)
    assert cli.project_folder() == ROOT and cli.PIPELINE.is_file()
    monkeypatch.setattr(cli, "CHECKOUT", tmp_path / "site-packages")  # where a plain install's package lives
    assert cli.project_folder() == tmp_path
    with pytest.raises(CapawareError, match="the demo's configs come with a checkout of capaware"):
        cli.demo([])


def xe_beside(trained, config: str, out: str, *overrides: str) -> Path:
    """A small XE run on the fixture's data and features (another core or setting than the fixture's)."""
    from captioners.config import load_captioner_config
    from captioners.xe import train as xe_train

    root, _, _, feats = trained
    xe_train(load_captioner_config(ROOT / config, [
        f"data.json={root / 'data' / 'dataset_coco.json'}", f"data.prepro_dir={root / 'prep'}",
        "data.word_count_threshold=1", f"data.features={feats}", "val.batch_size=4", f"out_dir={root / out}",
        "model.rnn_size=16", "model.input_encoding_size=12", "model.drop_prob_lm=0.0", "train.batch_size=4",
        "train.epochs=4", "train.lr=5e-3", "train.precision=float32", *overrides]), progress=False)
    return root / out


def caption_both_ways(run: Path, tests: dict, tmp_path: Path) -> tuple[Path, list[str], list[str]]:
    """(model file, ``capaware caption`` of the test images from it, captioners.predict's captions of the same
    images from feats.h5), both with beam 2."""
    from capaware import ImageCaptioner
    from captioners.predict import main as predict_main

    model_file = tmp_path / f"{run.name}.capaware"
    assert cli_main(["export", str(run), "-o", str(model_file)]) == 0
    ids = sorted(tests)
    got = ImageCaptioner.load(model_file).caption([tests[i] for i in ids], batch_size=4)
    predict_main(["--checkpoint", str(run / "best.pt"), "--split", "test", "--out", str(tmp_path / "p.json"),
                  "--beam-size", "2", "--no-progress"])
    expected = {r["image_id"]: r["caption"] for r in json.loads((tmp_path / "p.json").read_text())}
    return model_file, got, [expected[i] for i in ids]


def test_a_transformer_exports_and_captions_as_predict_does(trained, tmp_path):
    """The Transformer core goes through export and ``capaware caption`` as the LSTM cores do: the model
    file rebuilds it from its card (its layers, heads and ff_size included) and captions the test images
    as captioners.predict does from feats.h5."""
    run = xe_beside(trained, "configs/demo/demo_transformer.yaml", "tf", "model.ff_size=32", "train.lr_warmup_steps=0")
    model_file, got, expected = caption_both_ways(run, trained[2], tmp_path)
    m = read_model_file(model_file)
    assert m.card.core == "transformer" and m.card.model_args["core_args"] == {"layers": 2, "heads": 4, "ff_size": 32}
    assert got == expected


def test_standardised_inputs_are_saved_with_the_model_and_applied_at_caption_time(trained, tmp_path):
    """model.standardise (issue #46): the train split's per-channel statistics, against numpy, travel in best.pt and
    the model file, and ``capaware caption`` captions the test images as captioners.predict does."""
    from captioners.model import load_captioner
    from captioners.prepro import read_labels

    root, _, tests, feats = trained
    run = xe_beside(trained, "configs/demo/demo_topdown.yaml", "std", "model.att_hid_size=8", "model.standardise=true")
    model, card = load_captioner(run / "best.pt")
    assert card.model_args["standardise"] is True
    labels = read_labels(root / "prep" / "labels.h5")
    train_ids = set(labels.image_ids[labels.splits == "train"].tolist())
    with h5py.File(feats, "r") as f:
        rows = [r for r, i in enumerate(f["image_id"][()]) if int(i) in train_ids]
        fc, att = f["fc"][()][rows].astype(np.float64), f["att"][()][rows].astype(np.float64)
    att = att.reshape(-1, att.shape[-1])
    assert np.allclose(model.fc_mean.numpy(), fc.mean(0), atol=1e-5)
    assert np.allclose(model.att_std.numpy(), np.where(att.std(0) < 1e-6, 1.0, att.std(0)), rtol=1e-4, atol=1e-6)
    assert not np.allclose(model.fc_std.numpy(), 1.0)  # the statistics are really there, not the identity
    _, got, expected = caption_both_ways(run, tests, tmp_path)
    assert got == expected


def test_a_vits_features_export_and_caption_as_the_features_file_has_them(trained, tmp_path):
    """Issue #57: a captioner trained on a timm ViT's features (a tiny one, random weights in a local file) exports
    with that backbone, its own normalisation and its token grid; from the image files, ``capaware caption``
    computes exactly the features file's rows and the captions captioners.predict makes from them."""
    timm = pytest.importorskip("timm")
    from safetensors.torch import save_file

    from capaware import ImageCaptioner
    from feature_extract.config import load_features_config
    from feature_extract.dump import dump

    root, _, tests, _ = trained
    torch.manual_seed(0)
    vit = timm.create_model("vit_tiny_patch16_224", pretrained=False, dynamic_img_size=True)
    save_file({k: v.contiguous() for k, v in vit.state_dict().items()}, str(tmp_path / "vit.safetensors"))
    feats = root / "vit.h5"
    dump(load_features_config(None, ["backbone.checkpoint=imagenet", "backbone.arch=timm:vit_tiny_patch16_224",
                                     f"backbone.weights={tmp_path / 'vit.safetensors'}",
                                     f"images.captions={root / 'data' / 'dataset_coco.json'}", f"out={feats}",
                                     "input.size=64", "att_size=2", "batch_size=4", "num_workers=0",
                                     "dtype=float16", "precision=auto"]), "test", progress=False)
    run = xe_beside((root, None, tests, feats), "configs/demo/demo_att2all2.yaml", "vit_xe", "train.epochs=1")
    model_file, got, expected = caption_both_ways(run, tests, tmp_path)
    prep = read_model_file(model_file).preprocessing
    assert (prep.arch, prep.layer) == ("timm:vit_tiny_patch16_224", "last map")
    assert (prep.mean, prep.std) == tuple(tuple(map(float, v)) for v in (vit.pretrained_cfg["mean"],
                                                                          vit.pretrained_cfg["std"]))
    assert got == expected
    ids = sorted(tests)
    with h5py.File(feats, "r") as f:
        rows = [int(np.flatnonzero(f["image_id"][:] == i)[0]) for i in ids]
        want_att, want_fc = (torch.from_numpy(f[k][rows].astype(np.float32)) for k in ("att", "fc"))
    fc, att = ImageCaptioner.load(model_file).features([tests[i] for i in ids], batch_size=4)
    assert torch.equal(att, want_att) and torch.equal(fc, want_fc)  # the class token as fc, the tokens as att
