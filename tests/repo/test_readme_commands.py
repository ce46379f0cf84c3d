"""Every command README prints runs as written on a fresh clone (issue #48).

The commands are read from README itself: every line of its shell blocks and every inline command (`make ...`,
`capaware ...`, `python ...`, `bash ...`). Each is either run here, as written, in a copy of the checkout whose
configs are shrunk to the tiny pipeline's sizes (``RUN_HERE``), or named with the test that runs it
(``RUN_BY``), or named with the reason nothing runs it (``NOT_RUN``). The first test, in `make test`, fails on a
README command that is in none of them; the second, marked ``studies`` (`make test-studies`, a few minutes),
runs ``RUN_HERE`` one after another, as a user following README would.
"""
from __future__ import annotations

import ast
import json
import os
import re
import subprocess

import pytest
from omegaconf import OmegaConf

from capaware.stages import names
from tests.pipeline_helpers import ROOT, VENV, checkout, make, shrink, stage1_tiny

RUN_HERE = (  # in README's order of use; each as README prints it
    'make demo TORCH_PINS="torch==2.14.1 torchvision==0.29.1 --index-url https://download.pytorch.org/whl/cpu"',
    "make demo",
    "bash scripts/pipeline.sh configs/demo/pipeline_demo.yaml",
    "capaware run configs/demo/pipeline_transformer.yaml",
    "capaware export runs/demo -o model.capaware",
    "capaware caption --model model.capaware photos/ --out preds.json --attention att/",
    "bash scripts/stage1_embedder.sh configs/demo/demo_pose.yaml run_dir=runs/demo",
    "capaware doctor",
    "python -m capaware.doctor",
    "capaware doctor --config configs/paper/pipeline_coco.yaml",
    "capaware plan configs/paper/pipeline_coco.yaml --counts 113287,5000,5000 --figures "
    "benchmarks/results/plan_figures_h200.json [--gpus 8]",
    "python -m capdata.synthetic.coco_release runs/rehearsal",
    "TORCH_HOME=runs/rehearsal/torch capaware run runs/rehearsal/pipeline_coco_rehearsal.yaml",
    "make study",
    "make clean-demo",
)
RUN_BY = {  # command -> the test that runs it (on a tiny config or fixtures where the real one is long)
    "make study-trunks": "tests/studies/test_study_commands.py::"
                         "test_make_study_trunks_runs_every_declared_trunk_and_writes_table1_over_trunks",
    "make study-table1": "tests/studies/test_study_commands.py::"
                         "test_make_study_table1_keeps_each_trunk_and_writes_the_pooled_table_from_the_records",
    "make study-positive": "tests/studies/test_study_commands.py::"
                           "test_make_study_positive_chooses_a_recipe_and_writes_the_verdict",
    "capaware run configs/paper/pipeline_coco.yaml":
        "tests/capaware/test_coco_rehearsal.py::test_pipeline_coco_runs_end_to_end_on_the_released_layout",
    "capaware run configs/paper/pipeline_paper.yaml":
        "tests/capaware/test_pipeline_real_data.py::test_paper_data_stage_passes_on_fixtures_of_the_three_releases",
    "capaware run configs/paper/pipeline_coco.yaml --nproc 8":
        "tests/capaware/test_pipeline.py::test_two_processes_train_as_one_and_keep_the_skip_markers",
    "capaware run CONFIG --from features --to rl":
        "tests/capaware/test_pipeline.py::test_from_to_force_reruns_only_that_range",
    "capaware plan CONFIG":
        "tests/capaware/test_plan.py::test_capaware_plan_prints_every_stage_and_the_feature_files_disk",
    "pip install .": "tests/capaware/test_plugins.py::"
                     "test_a_loss_a_format_and_a_core_from_outside_run_through_capaware_run_from_a_plain_install",
    "python scripts/readme_results.py NAME=FILE ... --readme docs/results.md":
        "tests/repo/test_readme_results.py::test_blocks_are_replaced_by_the_files_and_nothing_else_changes",
}
NOT_RUN = {
    "make test": "the suite itself: CI's step (.ci/run) and the clean-clone check that ends every session",
    "make test-integration": "CI's second step (.ci/run): the whole-pipeline scenarios marked integration",
    "make test-studies": "CI's third step (.ci/run); this file's second test is in it",
    "make bench": "an hour of timings on purpose (its dry run is checked below); each benchmark prints the command "
                  "that reproduces its figures",
}
COMMAND = re.compile(r"(make|capaware|python|bash|pip|TORCH_HOME=\S+ capaware)( |$)")


def readme_commands() -> list[str]:
    """README's commands: shell-block lines (comments dropped) and inline spans that start like a command,
    outside the generated results blocks. Single words (`make`, `capaware`) name a tool, not a command."""
    text = re.sub(r"<!-- results:(\w+) -->.*?<!-- /results:\1 -->", "", (ROOT / "README.md").read_text(), flags=re.S)
    blocks = re.findall(r"```(?:bash|sh|shell)?\n(.*?)```", text, flags=re.S)
    found = [line.split("  #")[0].split(" # ")[0].strip() for block in blocks for line in block.splitlines()]
    inline = re.sub(r"```.*?```", "", text, flags=re.S)
    found += [" ".join(span.split()) for span in re.findall(r"`([^`]+)`", inline)]
    return list(dict.fromkeys(c for c in found if COMMAND.match(c) and " " in c))


def test_every_readme_command_is_run_here_or_by_a_named_test():
    covered = set(RUN_HERE) | set(RUN_BY) | set(NOT_RUN)  # `capaware caption` in prose: a covered command's start
    missing = [c for c in readme_commands() if c not in covered and not any(p.startswith(c + " ") for p in covered)]
    assert missing == [], f"README commands no test runs: {missing}"
    for target in RUN_BY.values():
        path, name = target.split("::")
        names = {n.name for n in ast.walk(ast.parse((ROOT / path).read_text())) if isinstance(n, ast.FunctionDef)}
        assert name in names, target
    stale = [c for c in RUN_HERE + tuple(RUN_BY) if c not in readme_commands()]
    assert stale == [], f"no longer in README: {stale}"


def test_make_bench_names_only_benchmarks_that_exist():
    """`make bench` is not run here (an hour); its dry run must name only benchmark files the checkout has."""
    dry = subprocess.run(["make", "-n", "bench", "VENV=/nonexistent-venv"], cwd=ROOT, capture_output=True, text=True)
    assert dry.returncode == 0, dry.stderr
    looped = re.findall(r"for b in ([\w \\\n]+);", dry.stdout)[0].replace("\\", " ").split()  # over benchmarks/$b.py
    named = set(re.findall(r"benchmarks/(\w+)\.py", dry.stdout)) | set(looped)
    assert len(named) >= 10 and all((ROOT / "benchmarks" / f"{b}.py").is_file() for b in named), sorted(named)


def shrink_stage_config(path, dotlist: str) -> None:
    """Write overrides into a stage config file itself, so that a command naming the file runs it tiny as written."""
    merged = OmegaConf.merge(OmegaConf.load(path), OmegaConf.from_dotlist(dotlist.split()))
    OmegaConf.save(merged, path)


def user(repo, command: str, timeout: int = 900) -> subprocess.CompletedProcess:
    """A README command in the copy, as a user's shell runs it: the venv first on PATH, the copy's code imported."""
    env = dict(os.environ, PATH=f"{VENV / 'bin'}:{os.environ['PATH']}", PYTHONPATH=str(repo), OMP_NUM_THREADS="1",
               CAPAWARE_METEOR="off")
    return subprocess.run(["bash", "-c", command], cwd=repo, env=env, capture_output=True, text=True, timeout=timeout)


def ok(out: subprocess.CompletedProcess) -> str:
    assert out.returncode == 0, out.stdout[-3000:] + out.stderr[-3000:]
    return out.stdout


def write_photos(folder) -> None:
    from PIL import Image, ImageDraw

    folder.mkdir()
    for i, colour in enumerate(("red", "green", "blue")):
        image = Image.new("RGB", (80, 60), "white")
        ImageDraw.Draw(image).ellipse((10 + 10 * i, 10, 50 + 10 * i, 50), fill=colour)
        image.save(folder / f"photo_{i}.jpg" if i else folder / f"photo_{i}.png")


@pytest.mark.studies
@pytest.mark.timeout(3000)
def test_readme_commands_run_as_written_on_tiny_configs(tmp_path):
    repo = checkout(tmp_path)
    for name in ("configs/demo/pipeline_demo.yaml", "configs/demo/pipeline_transformer.yaml",
                 "studies/stage_one_seeds/configs/pipeline_study.yaml"):
        shrink(repo / name)
    shrink_stage_config(repo / "configs/demo/demo_pose.yaml", stage1_tiny("configs/demo/demo_pose.yaml"))
    pins, demo, again, transformer, export, caption, stage1, doctor, doctor_module, doctor_coco, plan, rehearsal, \
        rehearsal_run, study, clean = RUN_HERE

    dry = user(repo, pins.replace("make demo", "make -n demo"))  # what the pinned install would run, no download
    assert ("uv pip install --python .venv/bin/python -q torch==2.14.1 torchvision==0.29.1 "
            "--index-url https://download.pytorch.org/whl/cpu") in ok(dry)
    assert "pipeline finished" in ok(make(repo, "demo"))
    assert (repo / "runs/demo/results/captioning/captioning.md").is_file()
    assert (repo / "runs/demo/report/index.html").is_file()
    assert ok(user(repo, again)).count("complete, skipped") == len(names())  # every stage found finished
    ok(user(repo, transformer))
    assert "export:" in ok(user(repo, export)) and (repo / "model.capaware").is_file()
    write_photos(repo / "photos")
    ok(user(repo, caption))
    preds = json.loads((repo / "preds.json").read_text())
    assert len(preds) == 3 and all(p["caption"] for p in preds) and list((repo / "att").iterdir())
    ok(user(repo, stage1))
    for command in (doctor, doctor_module):
        assert "doctor: all required checks passed" in ok(user(repo, command))
    coco = user(repo, doctor_coco)
    assert coco.returncode == 1 and "missing required: ImageNet resnet101, inputs" in coco.stdout
    assert "features" in ok(user(repo, plan.replace("[--gpus 8]", "--gpus 8")))  # the optional part too
    ok(user(repo, rehearsal))
    ok(user(repo, rehearsal_run))
    assert (repo / "runs/rehearsal/run/results/captioning/captioning.md").is_file()
    ok(make(repo, "study"))
    seeds = repo / "runs/study/results/stage1_seeds"  # every study over seeds 0 1 2, and the verdicts
    assert {p.name for p in seeds.glob("*.md")} == {"study_caption.md", "study_layout.md", "study_pose.md",
                                                     "study_pose_dims.md", "verdicts_study.md"}
    ok(make(repo, "clean-demo"))
    assert not (repo / "runs/demo").exists()
