"""docs/plugins.md's worked examples, run as written (issues #58, #65): each one's files written into an empty folder,
its commands run there, and what the page says they write is there. The loss example's config with its own row alone
then shows the page's claim that a row gives the same numbers beside any other rows; the backbone example trains
stage one on a plugin backbone from random weights and from a ``torch.save(module.state_dict())`` file, and dumps
and verifies stage two's features from that file."""
import re
import subprocess

import numpy as np
import pytest
import yaml

from tests.pipeline_helpers import ROOT, env

PAGE = ROOT / "docs" / "plugins.md"


def section(text: str, title: str) -> str:
    """The page's ``## `` section whose title starts with ``title``, up to the next one."""
    parts = re.split(r"^## ", text, flags=re.M)
    [found] = [part for part in parts if part.startswith(title)]
    return found


def blocks(text: str) -> tuple[dict[str, str], list[str]]:
    """The page's files (a fenced block after ``<!-- file: NAME -->``) and its commands (after ``<!-- run -->``)."""
    files, runs = {}, []
    for marker, body in re.findall(r"<!-- (file: \S+|run) -->\n```\w*\n(.*?)```", text, re.S):
        if marker == "run":
            runs += [line for line in body.splitlines() if line.strip()]
        else:
            files[marker.removeprefix("file: ")] = body
    return files, runs


@pytest.mark.timeout(300)
def test_the_plugin_page_runs_as_written_and_its_rows_do_not_depend_on_their_neighbours(tmp_path):
    files, runs = blocks(section(PAGE.read_text(), "A worked example: a loss"))
    assert set(files) == {"my_loss.py", "my_pose.yaml"} and runs == ["python -m embedder.rows --config my_pose.yaml"]
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    e = {k: v for k, v in env().items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(ROOT)}
    out = subprocess.run(runs[0].split(), cwd=tmp_path, env=e, capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    table = (tmp_path / "runs" / "results" / "my_pose" / "retrieval.md").read_text()
    assert all(row in table for row in ("| Oracle", "| Untrained", "| mine", "| L(Log-ratio)+M(Dense)")), table

    alone = yaml.safe_load(files["my_pose.yaml"])  # the log-ratio row without its neighbour, in a run of its own
    alone.update(methods=alone["methods"][1:], run_dir="alone", name="alone")
    alone["data"]["root"] = str(tmp_path / "runs" / "data" / "poses")  # the same images
    (tmp_path / "alone.yaml").write_text(yaml.safe_dump(alone))
    out = subprocess.run(["python", "-m", "embedder.rows", "--config", "alone.yaml"], cwd=tmp_path, env=e,
                         capture_output=True, text=True, timeout=240)
    assert out.returncode == 0, out.stdout[-2000:] + out.stderr[-2000:]
    with np.load(tmp_path / "runs" / "pose" / "retrieval" / "l_log_ratio_m_dense.npz") as beside, \
            np.load(tmp_path / "alone" / "pose" / "retrieval" / "l_log_ratio_m_dense.npz") as by_itself:
        assert np.array_equal(beside["query_emb"], by_itself["query_emb"])
        assert np.array_equal(beside["retrieved"], by_itself["retrieved"])


@pytest.mark.timeout(300)
def test_the_backbone_example_trains_from_random_weights_and_its_own_file_and_dumps_features(tmp_path):
    files, runs = blocks(section(PAGE.read_text(), "A worked example: a backbone"))
    assert set(files) == {"my_backbone.py", "tiny_pose.yaml", "save_weights.py", "tiny_features.yaml"}
    assert len(runs) == 5
    for name, body in files.items():
        (tmp_path / name).write_text(body)
    e = {k: v for k, v in env().items() if k != "PYTHONPATH"} | {"PYTHONPATH": str(ROOT)}
    outs = []
    for command in runs:
        out = subprocess.run(command.split(), cwd=tmp_path, env=e, capture_output=True, text=True, timeout=240)
        assert out.returncode == 0, command + "\n" + out.stdout[-2000:] + out.stderr[-2000:]
        outs.append(out)
    for run in ("pose", "pose_init"):
        assert (tmp_path / "runs" / run / "retrieval" / "l_log_ratio_m_dense.npz").is_file(), run
    import torch

    state = torch.load(tmp_path / "tiny_grid.pt", weights_only=True)
    assert list(state) == ["net.0.weight", "net.0.bias", "net.2.weight", "net.2.bias"]  # the module's own names
    random_start, file_start = (np.load(tmp_path / "runs" / run / "retrieval" / "untrained.npz")["query_emb"]
                                for run in ("pose", "pose_init"))
    assert not np.array_equal(random_start, file_start)  # the second run started from the file
    assert outs[-1].stdout.startswith("ok: runs/features/tiny_grid.h5: ") and outs[-1].stdout.rstrip().endswith(
        "-> TinyGrid"), outs[-1].stdout
