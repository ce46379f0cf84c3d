"""docs/plugins.md's worked example, run as written (issue #58): its files written into an empty folder, its command
run there, and what the page says it writes is there. The same config with the example's own row alone then shows
the page's claim that a row gives the same numbers beside any other rows."""
import re
import subprocess

import numpy as np
import pytest
import yaml

from tests.pipeline_helpers import ROOT, env

PAGE = ROOT / "docs" / "plugins.md"


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
    files, runs = blocks(PAGE.read_text())
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
