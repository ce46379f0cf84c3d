"""Stage two (feature_extract): values, resume after a kill, bad images, damaged files, mismatches.

Tiny on purpose: resnet18 on 64-pixel inputs (a native 2 x 2 layer4 grid), 8 random-noise images,
checkpoints built from a fresh Embedder (no training needed).
"""
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import h5py
import numpy as np
import pytest
import torch
import torch.nn.functional as F
from PIL import Image

from capcore.checkpoint import file_sha256, save_checkpoint
from capcore.errors import CapawareError, run_cli
from embedder.model import Embedder
from feature_extract import dump as dump_mod
from feature_extract.config import load_features_config
from feature_extract.h5io import feature_label, open_features
from feature_extract.verify import main as verify_main
from feature_extract.verify import verify

ROOT = Path(__file__).resolve().parents[2]
MEAN = torch.tensor([0.485, 0.456, 0.406]).view(1, 3, 1, 1)
STD = torch.tensor([0.229, 0.224, 0.225]).view(1, 3, 1, 1)
N = 8


# ------------------------------------------------------------------------------ fixture helpers


def write_image_set(folder: Path, n: int = N, corrupt: tuple[int, ...] = ()) -> Path:
    """Karpathy json + n random-noise PNGs of varied sizes/aspects; entries in ``corrupt`` get
    random bytes instead. Ids are 100 + i so they differ from row numbers."""
    rng = np.random.default_rng(0)
    images = []
    for i in range(n):
        name = f"img_{i:03d}.png"
        path = folder / "images" / name
        path.parent.mkdir(parents=True, exist_ok=True)
        if i in corrupt:
            path.write_bytes(rng.integers(0, 256, 300, dtype=np.uint8).tobytes())
        else:
            h, w = (40, 56) if i % 2 else (60, 48)
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(path)
        images.append({"filepath": "images", "filename": name, "imgid": i, "cocoid": 100 + i,
                       "split": ("train", "val", "test")[i % 3],
                       "sentences": [{"tokens": ["a", "thing"], "raw": "a thing", "sentid": i}]})
    path = folder / "dataset_coco.json"
    path.write_text(json.dumps({"images": images, "dataset": "coco"}))
    return path


def write_checkpoint(path: Path, arch: str = "resnet18", seed: int = 0, **extra) -> Path:
    torch.manual_seed(seed)
    model = Embedder(arch, 8)
    # Fresh BN statistics are 0/1: perturb them so eval-mode BN is really exercised.
    for m in model.modules():
        if isinstance(m, torch.nn.BatchNorm2d):
            m.running_mean.uniform_(-0.1, 0.1)
            m.running_var.uniform_(0.5, 1.5)
    save_checkpoint({"model": model.state_dict(), "arch": extra.pop("claimed_arch", arch), "embed_dim": 8,
                     **extra}, path)
    return path


pytestmark = pytest.mark.usefixtures("one_thread")


@pytest.fixture(scope="module")
def world(tmp_path_factory):
    root = tmp_path_factory.mktemp("features")
    return {"json": write_image_set(root / "data"),
            "img": write_checkpoint(root / "img.pt", kind="class-pretrained", normalised=False),
            "cap": write_checkpoint(root / "cap.pt", seed=1, method="L(Log-ratio)+M(Dense)", normalised=False),
            "root": root}


def overrides(world, out: Path, backbone: str = "img", **kw) -> list[str]:
    base = {"backbone.checkpoint": world[backbone], "images.captions": world["json"], "out": out,
            "input.size": 64, "att_size": 2, "batch_size": 3, "num_workers": 0, "dtype": "float32",
            "precision": "float32"}  # bit-identical resumes and fixed tolerances, on every CPU
    base.update(kw)
    return [f"{k}={v}" for k, v in base.items()]


def run_dump(world, out: Path, backbone: str = "img", force: bool = False, **kw) -> dict:
    cfg = load_features_config(None, overrides(world, out, backbone, **kw))
    return dump_mod.dump(cfg, "test", force=force, progress=False)


def cli(args, capsys) -> tuple[int, str]:
    """Run ``python -m feature_extract`` in-process (same code path as the CLI); (exit code, stderr)."""
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: dump_mod.main(list(args)))
        raise SystemExit(0)
    return exit_info.value.code, capsys.readouterr().err


def one_line_error(code, err, *needles):
    assert code == 2
    # a progress bar may precede it (it redraws with \r); the error itself is one line, the last
    lines = [ln for ln in err.replace("\r", "\n").splitlines() if ln.strip()]
    errors = [ln for ln in lines if "error:" in ln]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in err, err
    for needle in needles:
        assert needle in errors[0], errors[0]


def reference(ckpt: Path, paths, policy: str, size: int, att_size: int):
    """Direct forward, written independently: PIL resize, ImageNet normalisation, layer4, pooling."""
    model = Embedder("resnet18", 8)
    model.load_state_dict(torch.load(ckpt, weights_only=True)["model"])
    model.eval()
    atts, fcs = [], []
    for p in paths:
        img = Image.open(p).convert("RGB")
        if policy == "square":
            img = img.resize((size, size), Image.BILINEAR)
        else:
            w, h = img.size
            s = size / min(w, h)
            img = img.resize((round(w * s), round(h * s)), Image.BILINEAR)
        x = torch.from_numpy(np.asarray(img, dtype=np.float32) / 255).permute(2, 0, 1)[None]
        with torch.no_grad():
            fmap = model.features((x - MEAN) / STD)[0]  # [C, h, w]
        pooled = F.adaptive_avg_pool2d(fmap, att_size)  # [C, a, a]
        atts.append(pooled.permute(1, 2, 0).reshape(att_size * att_size, -1).numpy())
        fcs.append(fmap.mean((1, 2)).numpy())
    return np.stack(atts), np.stack(fcs)


def image_paths(world):
    doc = json.loads(world["json"].read_text())
    return [world["json"].parent / e["filepath"] / e["filename"] for e in doc["images"]]


# ------------------------------------------------------------------------------------- values


@pytest.mark.parametrize("policy", ["square", "short_side"])
def test_att_and_fc_equal_a_direct_forward(world, tmp_path, policy):
    out = tmp_path / "f.h5"
    run_dump(world, out, **{"input.policy": policy})
    att_ref, fc_ref = reference(world["img"], image_paths(world), policy, 64, 2)
    with open_features(out) as feats:
        att, fc = feats.att[()], feats.fc[()]
        assert att.shape == (N, 4, 512) and fc.shape == (N, 512) and att.dtype == np.float32
        assert feats.image_id.tolist() == [100 + i for i in range(N)]
        assert not feats.skipped.any() and feats.label == "Img"
        assert feats.attrs["input_policy"] == policy and feats.attrs["att_size"] == 2
    np.testing.assert_allclose(att, att_ref, rtol=1e-4, atol=1e-4)  # batched channels_last vs single
    np.testing.assert_allclose(fc, fc_ref, rtol=1e-4, atol=1e-4)
    if policy == "square":  # native 2 x 2 grid: fc is the mean of att over the grid
        np.testing.assert_allclose(fc, att.mean(1), rtol=1e-5, atol=1e-6)
    assert verify(out, str(world["json"])) == []


def test_float16_storage_and_workers_match_float32(world, tmp_path):
    """float16 + compression + a DataLoader worker: the same numbers up to float16 rounding."""
    run_dump(world, tmp_path / "a.h5")
    run_dump(world, tmp_path / "b.h5", dtype="float16", compression="gzip", num_workers=1, batch_size=5)
    with open_features(tmp_path / "a.h5") as a, open_features(tmp_path / "b.h5") as b:
        assert b.att.dtype == np.float16 and b.att.chunks == (1, 4, 512) and b.att.compression == "gzip"
        np.testing.assert_allclose(b.att[()].astype(np.float32), a.att[()], rtol=2e-3, atol=1e-3)
        np.testing.assert_allclose(b.fc[()].astype(np.float32), a.fc[()], rtol=2e-3, atol=1e-3)


def test_the_device_casts_to_float16_and_a_background_thread_writes(world, tmp_path, monkeypatch):
    """The same batches stored as float16: exactly numpy's rounding of the float32 dump (the cast moved to the
    device, its values did not), every batch committed by the writer thread, in order."""
    import threading

    commits = []
    real = dump_mod.RowWriter._commit
    monkeypatch.setattr(dump_mod.RowWriter, "_commit", lambda self, b, lo, hi, *rest: commits.append(
        (threading.current_thread().name, lo, hi)) or real(self, b, lo, hi, *rest))
    run_dump(world, tmp_path / "a.h5")
    run_dump(world, tmp_path / "h.h5", dtype="float16")
    assert commits and all(name.startswith("feats-writer") for name, _, _ in commits)
    assert [lo for _, lo, _ in commits] == [0, 3, 6] * 2  # two dumps, each batch in order
    with open_features(tmp_path / "a.h5") as a, open_features(tmp_path / "h.h5") as h:
        assert h.att.dtype == np.float16 and h.fc.dtype == np.float16
        assert np.array_equal(h.att[()], a.att[()].astype(np.float16))
        assert np.array_equal(h.fc[()], a.fc[()].astype(np.float16))


# ------------------------------------------------------------------------------------- resume


def test_killed_dump_resumes_to_the_uninterrupted_file(world, tmp_path):
    kw = {"num_workers": 1, "batch_size": 2}
    full = run_dump(world, tmp_path / "full.h5", **kw)
    assert full["status"] == "written"
    # The kill needs its own process (os._exit); same thread count, so the same bits.
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(torch.get_num_threads()))
    cmd = [sys.executable, "-m", "feature_extract", "--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
           *overrides(world, tmp_path / "killed.h5", **kw), "stop_after_batches=1"]
    killed = subprocess.run(cmd, cwd=ROOT, env=env, capture_output=True, text=True, timeout=120)
    assert killed.returncode == 3, killed.stderr  # died mid-run: batch 1's rows written, not counted
    with h5py.File(tmp_path / "killed.h5", "r+") as f:
        assert f.attrs["n_done"] == 2 and not f.attrs["complete"]
        assert f["att"][2:4].any()  # the torn batch reached the file...
        f["att"][2:] = 7.0  # ...and may be garbage (a torn write): rows past n_done must be redone
    with pytest.raises(CapawareError, match="incomplete"):
        open_features(tmp_path / "killed.h5")
    assert any("incomplete" in p for p in verify(tmp_path / "killed.h5"))
    resumed = run_dump(world, tmp_path / "killed.h5", **kw)
    assert resumed["status"] == "resumed" and resumed["done_now"] == N - 2
    with h5py.File(tmp_path / "full.h5", "r") as a, h5py.File(tmp_path / "killed.h5", "r") as b:
        assert set(a) == set(b)
        for name in a:
            assert np.array_equal(a[name][()], b[name][()]), name
        assert {k: v for k, v in a.attrs.items() if k != "command"} == \
               {k: v for k, v in b.attrs.items() if k != "command"}
    assert run_dump(world, tmp_path / "killed.h5", **kw)["status"].startswith("already complete")


def test_file_from_another_backbone_is_refused_on_resume(world, tmp_path, capsys):
    out = tmp_path / "f.h5"
    run_dump(world, out)
    code, err = cli(["--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
                     *overrides(world, out, backbone="cap")], capsys)
    one_line_error(code, err, str(out), "another backbone", "--force")
    code, err = cli(["--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
                     *overrides(world, out, att_size=1)], capsys)
    one_line_error(code, err, "another config", "att_size")
    run_dump(world, out, backbone="cap", force=True)
    assert feature_label(out) == "Cap"
    with open_features(out) as feats:
        assert feats.attrs["backbone"] == "metric-learning"
        assert feats.attrs["backbone_method"] == "L(Log-ratio)+M(Dense)"
        assert feats.attrs["checkpoint_sha256"] == file_sha256(world["cap"])


# ------------------------------------------------------------------------------- bad inputs


def test_corrupt_image_is_one_line_or_skipped(tmp_path, world, capsys):
    data = write_image_set(tmp_path / "data", n=5, corrupt=(3,))
    args = ["--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
            *overrides(world, tmp_path / "f.h5", **{"images.captions": data})]
    code, err = cli(args, capsys)
    one_line_error(code, err, "img_003.png", "cannot decode", "--skip-bad")
    code, err = cli(args + ["--skip-bad"], capsys)
    assert code == 0, err
    with open_features(tmp_path / "f.h5") as feats:
        assert feats.skipped.tolist() == [False, False, False, True, False]
        assert feats.attrs["n_skipped"] == 1
        att = feats.att[()]
    assert not att[3].any() and all(att[i].any() for i in (0, 1, 2, 4))
    assert verify(tmp_path / "f.h5", str(data)) == []
    first_bad = write_image_set(tmp_path / "data0", n=5, corrupt=(0,))  # the first batch fails: no empty file left
    code, err = cli(["--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
                     *overrides(world, tmp_path / "g.h5", **{"images.captions": first_bad})], capsys)
    one_line_error(code, err, "img_000.png", "cannot decode")
    assert not (tmp_path / "g.h5").exists()


def test_truncated_or_incomplete_file_is_refused(world, tmp_path, capsys):
    out = tmp_path / "f.h5"
    run_dump(world, out)
    bad = tmp_path / "truncated.h5"
    shutil.copy(out, bad)
    with open(bad, "r+b") as handle:
        handle.truncate(bad.stat().st_size // 2)
    with pytest.raises(CapawareError, match="truncated"):
        open_features(bad)
    with pytest.raises(SystemExit) as exit_info:
        verify_main([str(bad)])
    assert exit_info.value.code == 1 and "truncated" in capsys.readouterr().err
    unfinished = tmp_path / "unfinished.h5"
    shutil.copy(out, unfinished)
    with h5py.File(unfinished, "r+") as f:
        f.attrs["complete"] = False
    with pytest.raises(CapawareError, match="incomplete"):
        open_features(unfinished)
    with pytest.raises(SystemExit):
        verify_main([str(unfinished)])
    assert "incomplete" in capsys.readouterr().err


def test_verify_reports_each_problem(world, tmp_path, capsys):
    out = tmp_path / "f.h5"
    run_dump(world, out)
    verify_main([str(out), "--images", str(world["json"])])
    assert capsys.readouterr().out.startswith("ok:")
    other = write_image_set(tmp_path / "other", n=N - 1)
    with h5py.File(out, "r+") as f:
        f["fc"][2, 5] = np.nan
    with pytest.raises(SystemExit) as exit_info:
        verify_main([str(out), "--images", str(other)])
    err = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 1 and len(err) == 2
    assert "NaN/Inf" in err[0] and "row 2" in err[0] and "image ids" in err[1]
    with h5py.File(out, "r+") as f:  # a file without its backbone attributes: one line, no traceback
        del f.attrs["arch"]
    with pytest.raises(SystemExit) as exit_info:
        verify_main([str(out)])
    err = capsys.readouterr().err.splitlines()
    assert exit_info.value.code == 1 and "missing attribute(s) arch" in err[0]
    assert all(line.startswith(f"{out}: ") for line in err)  # one line per problem (the NaN row is still there)


def test_checkpoint_architecture_mismatch_is_a_clear_error(world, tmp_path, capsys):
    args = ["--config", str(ROOT / "configs/demo/demo_features_img.yaml")]
    code, err = cli(args + overrides(world, tmp_path / "a.h5", **{"backbone.arch": "resnet34"}), capsys)
    one_line_error(code, err, "checkpoint is a resnet18", "resnet34")
    lying = write_checkpoint(tmp_path / "lying.pt", claimed_arch="resnet34")
    code, err = cli(args + overrides(world, tmp_path / "b.h5", **{"backbone.checkpoint": lying}), capsys)
    one_line_error(code, err, "lying.pt", "do not fit a resnet34 trunk")
    code, err = cli(args + overrides(world, tmp_path / "c.h5", atts_size=3), capsys)
    one_line_error(code, err, "atts_size")
    assert not any((tmp_path / n).exists() for n in ("a.h5", "b.h5", "c.h5"))


def test_imagenet_backbone_reads_local_weights_only(world, tmp_path, capsys, monkeypatch):
    import torchvision

    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "torch_home"))
    args = ["--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
            *overrides(world, tmp_path / "f.h5", **{"backbone.checkpoint": "imagenet", "backbone.arch": "resnet18"})]
    code, err = cli(args, capsys)
    one_line_error(code, err, "resnet18-f37072fd.pth", "never downloads")
    weights = tmp_path / "resnet18-f37072fd.pth"
    torch.save(torchvision.models.resnet18().state_dict(), weights)
    code, err = cli(args + [f"backbone.weights={weights}"], capsys)
    assert code == 0, err
    with open_features(tmp_path / "f.h5") as feats:
        assert feats.attrs["checkpoint_sha256"] == "imagenet:resnet18-f37072fd.pth"
        assert feats.attrs["backbone"] == "imagenet" and feats.label == "Img"


def test_folder_source_takes_ids_from_file_names(tmp_path, world):
    write_image_set(tmp_path / "data", n=3)
    run_dump(world, tmp_path / "f.h5", **{"images.captions": "''", "images.folder": tmp_path / "data" / "images"})
    with open_features(tmp_path / "f.h5") as feats:
        assert feats.image_id.tolist() == [0, 1, 2]
        assert feats.h5["image_file"].asstr()[()].tolist() == ["img_000.png", "img_001.png", "img_002.png"]


@pytest.mark.parametrize("name", ["demo/demo_features_img", "demo/demo_features_cap", "paper/coco_features_imagenet",
                                  "paper/coco_features_cap"])
def test_shipped_feature_configs_load(name):
    cfg = load_features_config(ROOT / "configs" / f"{name}.yaml")
    assert cfg.input.policy == "square" and cfg.input.size // 32 == cfg.att_size


def test_images_karpathy_is_read_as_images_captions_with_one_note(tmp_path, capsys):
    """Issue #58: the caption file's key names its role (images.captions); the old key still loads, with one line
    from the dump only, and where a config inherits the old key and is given the new one, the new one wins."""
    old = tmp_path / "old.yaml"
    old.write_text("images:\n  karpathy: data/dataset_coco.json\nout: f.h5\n")
    quiet = load_features_config(old)
    assert (quiet.images.captions, quiet.images.karpathy) == ("data/dataset_coco.json", "")
    assert capsys.readouterr().err == ""
    load_features_config(old, note_renamed=True)
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "images.karpathy is now images.captions" in err[0] and str(old) in err[0]
    given = load_features_config(old, ["images.captions=other.json"])
    assert given.images.captions == "other.json"
    with pytest.raises(CapawareError, match="set exactly one of images.captions and images.folder"):
        load_features_config(old, ["images.folder=imgs"])


# ------------------------------------------------------------- verify never tracebacks; partial dumps


def run_module(module: str, *args, timeout: int = 180) -> subprocess.CompletedProcess:
    """``python -m MODULE ARGS`` in a process of its own: what a user sees, traceback or not."""
    env = dict(os.environ, PYTHONPATH=str(ROOT), OMP_NUM_THREADS=str(torch.get_num_threads()))
    return subprocess.run([sys.executable, "-m", module, *map(str, args)], cwd=ROOT, env=env,
                          capture_output=True, text=True, timeout=timeout)


def test_verify_cli_names_what_is_missing_in_one_line_never_a_traceback(world, tmp_path):
    good = tmp_path / "good.h5"
    run_dump(world, good)
    damaged = {}
    for name, damage in [("no_arch", lambda f: f.attrs.__delitem__("arch")),
                         ("no_fc", lambda f: f.__delitem__("fc")),
                         ("att_group", lambda f: (f.__delitem__("att"), f.create_group("att"))),
                         ("bad_att_size", lambda f: f.attrs.__setitem__("att_size", "two"))]:
        path = tmp_path / f"{name}.h5"
        shutil.copy(good, path)
        with h5py.File(path, "r+") as f:
            damage(f)
        damaged[name] = path
    not_hdf5 = tmp_path / "not_hdf5.h5"
    not_hdf5.write_bytes(b"\x00" * 100)
    expect = {"no_arch": "missing attribute(s) arch", "no_fc": "missing dataset(s) fc",
              "att_group": "missing dataset(s) att", "bad_att_size": "attribute att_size='two' is not an integer",
              "not_hdf5": "not a readable HDF5 file", "absent": "file not found"}
    paths = {**damaged, "not_hdf5": not_hdf5, "absent": tmp_path / "absent.h5"}
    # one process checks every file (each python -m pays the torch import): the CLI's own code path
    script = ("import sys\nfrom capcore.errors import run_cli\nfrom feature_extract.verify import main\n"
              "for path in sys.argv[1:]:\n"
              "    try:\n        run_cli(lambda: main([path]))\n"
              "    except SystemExit as e:\n        print(f'exit {e.code}', file=sys.stderr, flush=True)\n")
    proc = subprocess.run([sys.executable, "-c", script, *map(str, paths.values())], cwd=ROOT,
                          env=dict(os.environ, PYTHONPATH=str(ROOT)), capture_output=True, text=True, timeout=180)
    assert "Traceback" not in proc.stderr, proc.stderr
    lines = proc.stderr.splitlines()
    assert len(lines) == 2 * len(paths), proc.stderr  # per file: its one problem line, then its exit code
    for (name, path), line, code in zip(paths.items(), lines[::2], lines[1::2]):
        assert line.startswith(f"{path}: ") and expect[name] in line, (name, line)
        assert code == "exit 1", (name, code)
    real = run_module("feature_extract.verify", damaged["no_arch"])  # and as a user runs it
    assert real.returncode != 0 and "Traceback" not in real.stderr
    assert real.stderr.strip().splitlines() == [f"{damaged['no_arch']}: missing attribute(s) arch "
                                                "(every capaware dump writes them at creation)"]


def test_first_image_corrupt_leaves_no_file_and_rerun_after_fixing_completes(world, tmp_path, capsys):
    data = write_image_set(tmp_path / "data", n=5, corrupt=(0,))
    out = tmp_path / "feats.h5"
    args = ["--config", str(ROOT / "configs/demo/demo_features_img.yaml"),
            *overrides(world, out, **{"images.captions": data})]
    code, err = cli(args, capsys)
    one_line_error(code, err, "img_000.png", "cannot decode")
    assert sorted(p.name for p in tmp_path.iterdir()) == ["data"]  # no feats.h5, no .partial, no temp file
    Image.fromarray(np.full((30, 20, 3), 90, np.uint8)).save(data.parent / "images" / "img_000.png")
    code, err = cli(args, capsys)
    assert code == 0, err
    assert verify(out, str(data)) == [] and not (tmp_path / "feats.h5.partial").exists()


def test_dump_killed_before_its_first_batch_is_only_a_partial_file_and_reruns(world, tmp_path):
    out, partial = tmp_path / "feats.h5", tmp_path / "feats.h5.partial"
    args = ["--config", ROOT / "configs/demo/demo_features_img.yaml", *overrides(world, out, batch_size=2)]
    killed = run_module("feature_extract", *args, "stop_after_batches=0")
    assert killed.returncode == 3, killed.stderr  # batch 0's rows written, n_done never advanced
    assert not out.exists() and partial.is_file()
    [problem] = verify(out)
    assert "not found" in problem and "feats.h5.partial" in problem and "partial dump: 0 of 8 images done" in problem
    assert any("partial dump: 0 of 8 images done" in p for p in verify(partial))
    with pytest.raises(CapawareError, match="feats.h5.partial"):
        open_features(out)
    # the next run starts over from the .partial (nothing was committed) and dies after one committed
    # batch: now the partial dump is at the final path, named partial with its 2 images done
    killed = run_module("feature_extract", *args, "stop_after_batches=1")
    assert killed.returncode == 3, killed.stderr
    assert out.is_file() and not partial.exists()
    assert any("partial dump: 2 of 8 images done" in p for p in verify(out))
    resumed = run_dump(world, out, batch_size=2)
    assert resumed["status"] == "resumed" and resumed["done_now"] == N - 2
    assert verify(out, str(world["json"])) == [] and not partial.exists()


def test_preflight_disk_estimate_is_the_dumped_arrays_size(world, tmp_path):
    """capaware.preflight's bound of a features file (what it checks against free disk before a run) equals the
    att and fc arrays a real dump writes, for a trunk whose width it knows (resnet18: 512 channels)."""
    from capaware.preflight import caption_images, feature_bytes

    run_dump(world, tmp_path / "f.h5", **{"backbone.arch": "resnet18"})
    cfg = load_features_config(None, overrides(world, tmp_path / "f.h5", **{"backbone.arch": "resnet18"}))
    with h5py.File(tmp_path / "f.h5", "r") as f:
        written = f["att"].nbytes + f["fc"].nbytes
        n = f["att"].shape[0]
    assert caption_images(world["json"], []) == n
    assert feature_bytes(cfg, n) == written
