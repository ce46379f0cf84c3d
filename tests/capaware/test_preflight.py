"""Before the first stage: what the pending stages need (capaware.preflight), each missing thing one line, in
seconds. Java for the captioners, torchvision's ImageNet files under either release name, real data
folders, and the disk of the feature files."""
from __future__ import annotations

import json
import re
import subprocess
from pathlib import Path

import pytest
import torch

from capcore.errors import CapawareError
from embedder.config import load_config
from embedder.model import imagenet_releases, imagenet_weight_file
from capaware import preflight as environment
from feature_extract.config import load_features_config
from tests.pipeline_helpers import ROOT, TINY, env

NO_JAVA = "#!/bin/sh\necho 'Unable to locate a Java Runtime.' >&2\nexit 1\n"  # what macOS's /usr/bin/java stub does


def fake_java(tmp: Path) -> dict:
    bin_dir = tmp / "bin"
    bin_dir.mkdir()
    (bin_dir / "java").write_text(NO_JAVA)
    (bin_dir / "java").chmod(0o755)
    e = env()
    return dict(e, PATH=f"{bin_dir}:{e['PATH']}")


def test_without_java_the_pipeline_stops_before_its_first_stage_with_the_install_line(tmp_path):
    run = tmp_path / "run"
    out = subprocess.run(["bash", "scripts/pipeline.sh", str(TINY), "--run", str(run)], cwd=ROOT,
                         env=fake_java(tmp_path), capture_output=True, text=True, timeout=120)
    assert out.returncode == 2
    lines = out.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: java: no Java runtime"), out.stderr
    assert "apt-get install -y openjdk-17-jre-headless" in lines[0] and "brew install openjdk@17" in lines[0]
    assert not (run / "logs").exists()  # nothing ran


def test_stages_that_score_nothing_need_no_java(tmp_path):
    plan = ["python", "-m", "capaware.pipeline_plan", str(TINY), "--run", str(tmp_path / "run"), "preflight"]
    no_java = fake_java(tmp_path)
    assert subprocess.run(plan + ["data", "features"], cwd=ROOT, env=no_java, capture_output=True).returncode == 0
    late = subprocess.run(plan + ["rl", "report"], cwd=ROOT, env=no_java, capture_output=True, text=True)
    assert late.returncode == 2 and "stages rl score captions" in late.stderr


def test_imagenet_weights_are_found_under_either_release_name(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    hub = tmp_path / "hub" / "checkpoints"
    hub.mkdir(parents=True)
    v1, v2 = (Path(u).name for u in imagenet_releases("resnet50"))
    assert v1 != v2
    with pytest.raises(CapawareError, match=f"{v1} or {v2}"):
        imagenet_weight_file("resnet50")
    torch.save({}, hub / v2)
    assert imagenet_weight_file("resnet50") == hub / v2
    torch.save({}, hub / v1)
    assert imagenet_weight_file("resnet50") == hub / v1  # both there: the paper-era V1
    mine = tmp_path / "my_resnet50.pth"
    with pytest.raises(CapawareError) as err:  # an explicit file that is absent is named, not the hub
        imagenet_weight_file("resnet50", str(mine))
    assert err.value.where == str(mine)
    torch.save({}, mine)
    assert imagenet_weight_file("resnet50", str(mine)) == mine


def test_coco_alone_lists_each_missing_input_once(tmp_path, monkeypatch):
    monkeypatch.setenv("TORCH_HOME", str(tmp_path / "empty"))
    run = str(tmp_path / "run")
    stage1 = [load_config(ROOT / "configs/paper/coco_caption.yaml", [f"run_dir={run}", f"data.root={tmp_path}/coco"])]
    features = [load_features_config(ROOT / f"configs/paper/coco_features_{k}.yaml",
                                     [f"run_dir={run}", f"images.captions={tmp_path}/coco/dataset_coco.json"])
                for k in ("imagenet", "cap")]
    lines = environment.preflight(["data", "stage1", "features"], stage1, features, run)
    assert len(lines) == 4, lines  # the data folder, the json (one line per features config), resnet101 once
    assert sum("data folder not found" in ln for ln in lines) == 1
    assert sum("dataset_coco.json: image list not found" in ln for ln in lines) == 2
    weights = [ln for ln in lines if "ImageNet weights for resnet101" in ln]
    assert len(weights) == 1 and "stage one coco_caption, features imagenet.h5" in weights[0]
    assert environment.preflight(["scores", "report"], stage1, features, run) == []
    data_only = environment.preflight(["data"], stage1, features, run)  # reads the data, loads no weights
    assert len(data_only) == 1 and "data folder not found" in data_only[0]


def test_features_that_do_not_fit_the_disk_are_refused(tmp_path, monkeypatch):
    images = [{"filepath": "val2014", "filename": f"{i}.jpg", "cocoid": i, "split": "test",
               "sentences": [{"tokens": ["a", "dog"], "raw": "A dog."}]} for i in range(1000)]
    (tmp_path / "dataset_coco.json").write_text(json.dumps({"images": images}))
    cfg = load_features_config(ROOT / "configs/paper/coco_features_imagenet.yaml",
                               [f"run_dir={tmp_path / 'run'}", f"images.captions={tmp_path / 'dataset_coco.json'}"])
    need = 1000 * (14 * 14 + 1) * 2048 * 2  # images x (att cells + fc) x ResNet-101 channels x float16
    assert environment.feature_bytes(cfg, 1000) == need
    free = type("Usage", (), {"free": need - 1})
    monkeypatch.setattr(environment.shutil, "disk_usage", lambda path: free)
    problems = environment.check_features([cfg], str(tmp_path / "run"))
    assert len(problems) == 1 and "1 feature file(s) of up to 1,000 images" in problems[0].problem
    free.free = need
    assert environment.check_features([cfg], str(tmp_path / "run")) == []


def test_doctor_checks_every_architecture_a_pipeline_config_loads(tmp_path):
    e = dict(env(), TORCH_HOME=str(tmp_path))
    out = subprocess.run(["python", "-m", "capaware.doctor", "--quick", "--config",
                          "configs/paper/pipeline_paper.yaml"], cwd=ROOT, env=e, capture_output=True, text=True,
                         timeout=120)
    assert out.returncode == 1
    missing = [ln.split()[2] for ln in out.stdout.splitlines() if ln.startswith("MISSING ImageNet")]
    assert missing == ["resnet34", "resnet101"], out.stdout  # pose and layout use resnet34, captions resnet101
    disk = [ln for ln in out.stdout.splitlines() if ln.startswith("warn    disk")]  # COCO's json is not here
    assert len(disk) == 1 and "per 100,000 images" in disk[0] and "data/coco/dataset_coco.json is there" in disk[0]
    per = sum(environment.feature_bytes(c, 100_000) for c in (
        load_features_config(f"configs/paper/coco_features_{k}.yaml") for k in ("imagenet", "cap")))
    assert f"take up to {per / 1e9:.0f} GB" in disk[0], out.stdout
    assert out.stdout.splitlines()[-1].startswith("doctor: missing required: ImageNet resnet34")


def test_doctor_says_where_the_vit_example_weight_file_goes_and_where_to_get_it(tmp_path, monkeypatch):
    """Issue #57: the example COCO config on a ViT-B/16 names its weight file; the doctor checks it like the
    ResNets' ImageNet files and says what to download and where it goes (timm's Hugging Face file)."""
    pytest.importorskip("timm")
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("TORCH_HOME", str(tmp_path))
    # the doctor's config checks in this process (how the doctor prints a check: the test above)
    vit, = [c for c in environment.check_config("configs/paper/pipeline_coco_vit.yaml")
            if c.name == "ImageNet timm:vit_base_patch16_224"]
    assert vit.status == "MISSING" and vit.required
    assert "data/weights/vit_base_patch16_224.safetensors not found" in vit.detail and "features vit.h5" in vit.detail
    assert vit.fix.startswith("download https://huggingface.co/timm/vit_base_patch16_224.") and \
        vit.fix.endswith("/resolve/main/model.safetensors on a machine with internet and put it there (or fix the "
                         "config's weights key)"), vit.fix
    cfg = load_features_config(ROOT / "configs/paper/coco_features_vit.yaml")
    assert cfg.input.size // 16 == cfg.att_size == 14  # the patch grid is the att grid, unpooled
    (tmp_path / "vit.safetensors").write_bytes(b"x")
    found = environment.check_weights("timm:vit_base_patch16_224", str(tmp_path / "vit.safetensors"), "features")
    assert found.status == "ok" and str(tmp_path / "vit.safetensors") in found.detail


def test_doctor_names_the_optional_checks_it_misses(capsys, monkeypatch):
    from capaware import doctor

    monkeypatch.setattr(environment, "check_java", lambda: environment.Check("java", "ok", "java 17"))
    monkeypatch.setattr(environment, "check_ptb", lambda: environment.Check("PTB tokenizer", "ok", "jar"))
    monkeypatch.setattr(environment, "check_spice", lambda _: environment.Check(
        "SPICE models", "MISSING", "no CoreNLP", "run get_stanford_models", required=False))
    monkeypatch.setattr(environment, "check_torch", lambda: [environment.Check("torch", "ok", "2.14")])
    monkeypatch.setattr(environment, "check_weights", lambda arch: environment.Check(
        f"ImageNet {arch}", "MISSING", "no file", "put it there", required=False))
    assert doctor.main(["--quick"]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert [ln.endswith("(optional)") for ln in lines if ln.startswith("MISSING")] == [True, True]
    assert lines[-1] == ("doctor: all required checks passed; missing optional: SPICE models, ImageNet resnet101 "
                         "(the pipeline runs without them)")


def test_make_demo_without_java_stops_before_installing_anything(tmp_path):
    venv = tmp_path / "venv"
    e = {k: v for k, v in fake_java(tmp_path).items() if k not in ("MAKELEVEL", "MAKEFLAGS", "MFLAGS")}  # as a user
    out = subprocess.run(["make", "-s", "demo", f"VENV={venv}"], cwd=ROOT, env=e, capture_output=True, text=True,
                         timeout=60)
    assert out.returncode != 0 and not venv.exists()
    ours = [ln for ln in out.stderr.splitlines() if not re.match(r"make(\[\d+\])?:", ln)]  # make's own "Error 1"
    assert len(ours) == 1 and ours[0].startswith("error: java: no Java runtime"), out.stderr
    assert "apt-get install -y openjdk-17-jre-headless" in ours[0] and "brew install openjdk@17" in ours[0]
    from eval.captions_java import JAVA_FIX
    assert f"(fix: {JAVA_FIX})" in ours[0]  # the Makefile's copy of the fix (it runs before the venv) has not drifted


def coco_caption_on(tmp_path: Path, n_train: int, *overrides: str):
    """configs/paper/coco_caption.yaml on a Karpathy json of ``n_train`` train images (and 10 test ones)."""
    images = [{"filepath": "train2014", "filename": f"{i}.jpg", "cocoid": i,
               "split": "train" if i < n_train else "test",
               "sentences": [{"raw": "a dog", "tokens": ["a", "dog"]}]} for i in range(n_train + 10)]
    (tmp_path / "coco").mkdir(parents=True)
    (tmp_path / "coco" / "dataset_coco.json").write_text(json.dumps({"images": images}))
    return load_config(ROOT / "configs/paper/coco_caption.yaml",
                       [f"run_dir={tmp_path / 'run'}", f"data.root={tmp_path / 'coco'}", "model.init=none", *overrides])


def test_graph_workers_that_do_not_fit_the_memory_are_refused_in_one_line(tmp_path, monkeypatch):
    from embedder.labels.graph_memory import worker_bytes

    cfg = coco_caption_on(tmp_path, 2000, "graph.workers=16")
    assert environment.caption_graph_images(cfg) == 2000  # train + restval of the json, not its test images
    memory = 3 * worker_bytes(2000)  # three workers' worth: 16 do not fit, 2 do (85% headroom)
    monkeypatch.setattr("capcore.machine.available_memory", lambda: memory)
    lines = environment.preflight(["stage1"], [cfg], [], str(tmp_path / "run"))
    assert len(lines) == 1 and "\n" not in lines[0], lines
    assert lines[0].startswith("graph.workers of coco_caption: 16 caption-graph worker(s) x 1 rank(s) need about")
    assert "fix: set graph.workers=2 or leave it null" in lines[0]
    monkeypatch.setenv("LOCAL_WORLD_SIZE", "2")  # two ranks on this machine: each has half the memory
    assert "x 2 rank(s)" in environment.preflight(["stage1"], [cfg], [], str(tmp_path / "run"))[0]
    monkeypatch.delenv("LOCAL_WORLD_SIZE")
    fits = coco_caption_on(tmp_path / "b", 2000, "graph.workers=2")
    assert environment.preflight(["stage1"], [fits], [], str(tmp_path / "run")) == []
    auto = coco_caption_on(tmp_path / "c", 2000)
    assert auto.graph.workers is None  # the shipped config leaves it to the machine: capped at run time, not refused
    assert environment.preflight(["stage1"], [auto], [], str(tmp_path / "run")) == []
    assert environment.preflight(["features"], [cfg], [], str(tmp_path / "run")) == []  # no graph in that stage


def test_too_many_workers_and_a_network_filesystem_are_warned_not_refused(tmp_path, monkeypatch):
    cfg = coco_caption_on(tmp_path, 100, "graph.workers=64")
    features = load_features_config(ROOT / "configs/paper/coco_features_imagenet.yaml", [f"run_dir={tmp_path / 'run'}"])
    monkeypatch.setattr("capcore.machine.cores", lambda: 4)
    monkeypatch.setattr("capcore.machine.on_network_filesystem", lambda path: "nfs4")
    lines = environment.preflight_warnings(["stage1", "features"], [cfg], [features])
    assert len(lines) == 2, lines
    assert lines[0].startswith("graph.workers of coco_caption: 64 processes on 4 cores (fix: set graph.workers=4")
    assert "network filesystem (nfs4)" in lines[1] and "fix: set run_dir to a local disk" in lines[1]
    assert environment.preflight_warnings(["captioners"], [cfg], [features]) == []  # neither stage pending


def test_a_checkpoint_init_that_is_missing_is_one_line_naming_it_and_the_stand_in(tmp_path):
    """model.init as a path (the demo loads its class-pretrained stand-in so): refused before any stage when the
    file is not there, unless the run itself writes it; a file that exists passes."""
    missing = tmp_path / "weights" / "class_pretrained_resnet10.pt"
    cfg = load_config("configs/demo/demo_caption.yaml", [f"model.init={missing}", f"run_dir={tmp_path / 'run'}"])
    err, = environment.check_stage_one([cfg], str(tmp_path / "run"))
    assert str(missing) in str(err) and "model.init of demo_caption" in str(err) and "make stand-in" in str(err)
    missing.parent.mkdir()
    missing.write_bytes(b"")
    assert environment.check_stage_one([cfg], str(tmp_path / "run")) == []
    inside = load_config("configs/demo/demo_caption.yaml", [f"run_dir={tmp_path / 'run'}",
                                                             f"model.init={tmp_path / 'run' / 'trunk.pt'}"])
    assert environment.check_stage_one([inside], str(tmp_path / "run")) == []  # the run writes it


def test_a_self_retrieval_run_without_its_joint_model_or_pool_stops_in_the_preflight(tmp_path):
    """Issue #66: an SCST config with retrieval.weight > 0 reads a joint model (the joint stage writes it) and maybe
    an unlabeled pool (a features file): missing, with no pending stage to write them in the run folder, each is
    one line naming the file, the run and the fix; a pending writer, or a plain SCST config, is no problem."""
    from rl.config import load_scst_config

    run = str(tmp_path / "run")
    cfg_path = ROOT / "configs/demo/demo_att2all2_sr_scst.yaml"
    sr = load_scst_config(cfg_path, [f"run_dir={run}", "data.features=img",
                                     f"retrieval.unlabeled={run}/features/unlabeled_img.h5"])
    plain = load_scst_config(ROOT / "configs/demo/demo_att2all2_scst.yaml", [f"run_dir={run}"])
    lines = environment.preflight(["rl"], [], [], run, rl=[sr, plain])
    assert len(lines) == 2 and all("\n" not in line and "demo_att2all2_sr" in line for line in lines)
    assert f"{run}/joint/img/best.pt: not found" in lines[0] and "joint: list" in lines[0]
    assert "unlabeled_img.h5: not found" in lines[1] and "retrieval.unlabeled=''" in lines[1]
    assert environment.preflight(["joint", "rl"], [], [], run, rl=[sr, plain]) == [lines[1]]
    assert environment.preflight(["features", "joint", "rl"], [], [], run, rl=[sr, plain]) == []
    assert environment.preflight(["scores"], [], [], run, rl=[sr]) == []  # rl not pending: not its business
