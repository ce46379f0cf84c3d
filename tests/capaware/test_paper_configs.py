"""The paper configs train what their tables read (issue #47): Table 1's COCO pipeline plans one stage-one row,
the paper's log-ratio + dense; Fig. 3c's three rows are their own config, in the same folder, with the same
fingerprint for the shared row, so that running one after the other trains each row once."""
import subprocess
import sys

from embedder.config import load_config
from embedder.train import method_fingerprint
from tests.pipeline_helpers import ROOT


def plan(config: str, stage: str) -> list[str]:
    out = subprocess.run([sys.executable, "-m", "capaware.pipeline_plan", config, "--run", "runs/x", "commands", stage],
                         cwd=ROOT, capture_output=True, text=True, check=True)
    return out.stdout.split("\n")[:-1]


def test_table_1s_coco_pipeline_trains_one_row_and_fig_3c_has_its_own_config():
    assert plan("configs/paper/pipeline_coco.yaml", "stage1") == [
        "python -m capaware.stage stage1 configs/paper/coco_caption.yaml run_dir=runs/x"]
    table1 = load_config(str(ROOT / "configs/paper/coco_caption.yaml"), [])
    fig3c = load_config(str(ROOT / "configs/paper/coco_caption_fig3c.yaml"), [])
    assert [m.name for m in table1.methods] == ["L(Log-ratio)+M(Dense)"]
    assert [m.name for m in fig3c.methods] == ["L(Triplet)+M(Binary)", "L(Triplet)+M(Dense)", "L(Log-ratio)+M(Dense)"]
    assert fig3c.out_dir == table1.out_dir  # the same folder: the shared row is found finished, not retrained
    assert method_fingerprint(fig3c, fig3c.methods[2]) == method_fingerprint(table1, table1.methods[0])
    assert plan("configs/paper/pipeline_coco_fig3c.yaml", "stage1") == [
        "python -m capaware.stage stage1 configs/paper/coco_caption_fig3c.yaml run_dir=runs/x"]
    assert plan("configs/paper/pipeline_coco_fig3c.yaml", "captioners") == []
    assert "configs/paper/coco_caption_fig3c.yaml" in " ".join(plan("configs/paper/pipeline_paper.yaml", "stage1"))
