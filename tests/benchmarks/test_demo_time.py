"""benchmarks/demo_time.py: a stage's wall time and its pieces, read from pipeline logs written by hand."""
import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
spec = importlib.util.spec_from_file_location("demo_time", ROOT / "benchmarks" / "demo_time.py")
demo_time = importlib.util.module_from_spec(spec)
spec.loader.exec_module(demo_time)

BAR = "poses:  50%|#####     | 750/1500 [00:03<00:03, 250img/s]\rposes: 100%|##########| 1500/1500 [01:05<00:00]"


def test_timing_lines_bars_and_stage_walls(tmp_path):
    logs = tmp_path / "logs"
    logs.mkdir()
    (logs / "data.log").write_text("# 2026 stage data\n$ python -m capaware.stage data configs/demo/demo_pose.yaml "
                                   f"--only track\n{BAR}\n[data] done in 70 s\n")
    (logs / "captioners.log").write_text(
        "$ python -m capaware.stage xe configs/demo/demo_att2all2.yaml data.features=img\n"
        "timing xe img_att2all2: train 98.4 s, score 13.5 s\n"
        "$ python -m capaware.stage xe configs/demo/demo_att2all2.yaml data.features=cap\n"
        "timing xe cap_att2all2: train 48.3 s, score 13.2 s\n"
        "a bar that a timed stage ignores: 100%|##########| 5/5 [00:09<00:00]\n"
        "[captioners] done in 120 s\n")
    wall, pieces = demo_time.stage_pieces(logs / "data.log")
    assert wall == 70 and pieces == {"poses /1500 (demo_pose --only track)": 65}
    wall, pieces = demo_time.stage_pieces(logs / "captioners.log")
    assert wall == 120 and pieces == {"xe img_att2all2: train": 98.4, "xe img_att2all2: score": 13.5,
                                      "xe cap_att2all2: train": 48.3, "xe cap_att2all2: score": 13.2}
    table = demo_time.table(tmp_path).splitlines()
    assert table[2].startswith("| data | 70 | poses /1500") and table[3].startswith("| captioners | 120 | xe img")
    assert table[-1] == "| pipeline | 190 | |"
