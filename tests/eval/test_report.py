"""eval.reporting.report + eval.reporting.check on a small but real run folder.

The folder is written by the stages' own writers (embedder.rows.write_retrieval/write_items,
embedder.retrieval_report.write_report, embedder.retrieval_grid.write_grids, eval.reporting.results_table.write_table,
eval.attention_maps.plot_attention) and then moved, so every path recorded inside it is stale and the
report has to find its inputs from the folder itself. Some inputs are left out on purpose (the
caption track, the layout study's grids and curves.png, one captioner's attention maps).
"""
import json
import os
import re
import shutil
from pathlib import Path
from types import SimpleNamespace

import h5py
import numpy as np
import pytest
from PIL import Image

from capcore.errors import CapawareError, run_cli
from capcore.run_layout import MANIFEST, StudyManifest, write_manifest
from capdata.readers.pose_json import read_pose_json
from capdata.records import MPII_JOINTS, select
from embedder.retrieval_grid import write_grids
from embedder.retrieval_report import write_report
from embedder.rows import write_items, write_retrieval
from eval.reporting import check as report_check
from eval.reporting.report import main as report_main
from eval.reporting.check import check_dom
from eval.reporting.results_table import write_table

N_TRAIN, N_TEST, K = 24, 6, 10
TEST_IDS = [101, 102, 103, 104, 105, 106]
CAP_MINUS_IMG = {101: 0.1, 102: 0.9, 103: -0.5, 104: 0.4, 105: -0.8, 106: 0.0}  # per-image CIDEr-D, XE and RL


def need_chromium() -> str:
    try:
        return report_check.find_chromium()
    except CapawareError as err:
        if os.environ.get("CAPAWARE_REQUIRE_CHROMIUM") == "1":
            pytest.fail(f"CAPAWARE_REQUIRE_CHROMIUM=1 but {err}")
        pytest.skip(f"no Chromium: {err}")


def png(path: Path, value: int, size: int = 16) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    Image.new("RGB", (size, size), (value % 256, 90, 255 - value % 256)).save(path)
    return path


# ---------------------------------------------------------------------------------- stage one


def write_poses(root: Path) -> np.ndarray:
    """A pose JSON whose labels vary along one parameter t (arms raised by t), images coloured by t."""
    t = np.linspace(0, 1, N_TRAIN + N_TEST)
    rng = np.random.default_rng(0)
    base = rng.uniform(10, 54, (len(MPII_JOINTS), 2))
    arms = np.zeros((len(MPII_JOINTS), 2))
    arms[10:16, 1] = -30  # wrists, elbows, shoulders move up with t
    images = []
    for i, ti in enumerate(t):
        joints = base + ti * arms + rng.normal(0, 0.3, base.shape)
        png(root / "images" / f"{i:03d}.png", int(ti * 255))
        images.append({"file": f"images/{i:03d}.png", "split": "train" if i < N_TRAIN else "test", "width": 64,
                       "height": 64, "joints": joints.round(2).tolist(), "visible": [1] * len(MPII_JOINTS)})
    (root / "poses.json").write_text(json.dumps({"images": images}))
    return t


def write_study(run: Path, name: str, track: str, dims: list[int], poses: Path, rows: dict[str, np.ndarray | None]):
    """A study folder as embedder.rows leaves it, and its manifest under RUN/results/tiny_<name>;
    ``rows``: method name -> [N, D] embeddings (None: Oracle)."""
    folder = run / name
    losses = {row: "log_ratio" if "Log-ratio" in row or row == "LR" else "triplet" for row in rows}
    write_manifest(run / "results" / f"tiny_{name}" / MANIFEST, StudyManifest(
        name=f"tiny_{name}", track=track, study_dir=str(folder), sweep=bool(dims), losses=losses,
        data={"track": track, "format": "pose_json", "root": str(poses)}, query_split="test", db_split="train"), run)
    ret = folder / "retrieval"
    ret.mkdir(parents=True)
    (folder / "config.yaml").write_text(json.dumps({  # YAML is a superset of JSON
        "name": name, "out_dir": str(folder), "dims": dims,
        "data": {"track": track, "format": "pose_json", "root": str(poses)},
        "eval": {"query_split": "test", "db_split": "train", "k": K}}))
    records = read_pose_json(poses / "poses.json")
    evalset = select(records, np.isin(records.splits, ["test", "train"]))
    write_items(ret / "items.json", evalset)
    q, db = np.flatnonzero(evalset.splits == "test"), np.flatnonzero(evalset.splits == "train")
    joints = evalset.joints

    def pairwise(a, b):  # the pose distance: sum over joints of the Euclidean distance
        return np.linalg.norm(joints[a][:, None] - joints[b][None], axis=-1).sum(-1)

    track_ = SimpleNamespace(query_idx=q, db_idx=db, eval_space=SimpleNamespace(pairwise=pairwise))
    d = pairwise(q, db)
    ideal = np.sort(d, axis=1)[:, :K]
    for order, (row, emb) in enumerate(rows.items()):
        if emb is None:
            write_retrieval(ret / "oracle.npz", row, order, np.argsort(d, 1)[:, :K], track_, ideal, "labels")
            continue
        qe, de = emb[q], emb[db]
        ranked = np.argsort(np.linalg.norm(qe[:, None] - de[None], axis=-1), 1)[:, :K]
        write_retrieval(ret / f"row{order}.npz", row, order, ranked, track_, ideal, f"src{order}", qe, de)
    return ret


def write_stage_one(run: Path) -> None:
    poses = run / "data" / "poses"
    t = write_poses(poses)
    rng = np.random.default_rng(1)
    good = np.stack([t, t ** 2, 1 - t], 1) + rng.normal(0, 0.01, (len(t), 3))  # follows the labels
    rand = lambda dim: rng.normal(size=(len(t), dim))
    main_rows = {"Oracle": None, "Untrained": rand(16), "L(Log-ratio)+M(Dense)": good, "L(Triplet)+M(Binary)": rand(8)}
    ret = write_study(run, "pose", "pose", [], poses, main_rows)
    write_report(ret, run / "results" / "tiny_pose", "tiny_pose (pose track)")
    write_grids(ret, run / "results" / "tiny_pose", queries=[0, 1], top=3)
    ret = write_study(run, "layout", "layout", [], poses, {"Oracle": None, "Untrained": rand(8), "LR": good})
    write_report(ret, run / "results" / "tiny_layout", "tiny_layout (layout track)")
    (run / "results" / "tiny_layout" / "curves.png").unlink()  # the report re-plots it; no grids at all
    sweep = {"Oracle": None, "Untrained": rand(8), "L(Log-ratio)+M(Dense) 8-D": good,
             "L(Triplet)+M(Dense) 8-D": rand(8), "L(Log-ratio)+M(Dense) 16-D": good + 0.01,
             "L(Triplet)+M(Dense) 16-D": rand(16)}
    ret = write_study(run, "pose_dims", "pose", [8, 16], poses, sweep)
    write_report(ret, run / "results" / "tiny_pose_dims", "tiny_pose_dims (pose track)")


# -------------------------------------------------------------------------------- stage three


def write_captioner(run: Path, folder: str, core: str, feats: Path, stage: str, refs: Path, attention: bool) -> Path:
    """What scripts/stage3_captioners.sh / stage3_rl.sh leave in a captioner run folder."""
    out = run / "captioners" / folder
    out.mkdir(parents=True)
    features = "Cap" if "cap" in folder else "Img"
    preds = [{"image_id": i, "caption": f"{features} {stage} caption of image {i}"} for i in TEST_IDS]
    (out / "preds_test.json").write_text("[\n" + ",\n".join(json.dumps(r) for r in preds) + "\n]\n")
    (out / "preds_test.meta.json").write_text(json.dumps({
        "checkpoint": str(out / "best.pt"), "config_hash": "h", "core": core, "stage": stage, "split": "test",
        "method": "beam", "beam_size": 2, "temperature": 1.0, "features": str(feats), "n_images": len(preds),
        "command": "python -m captioners.predict ..."}))
    cider = {i: 0.5 + (CAP_MINUS_IMG[i] if features == "Cap" else 0.0) for i in TEST_IDS}
    per_image = [{"image_id": i, "caption": p["caption"], "BLEU-4": 0.2, "CIDEr-D": cider[i]}
                 for i, p in zip(TEST_IDS, preds)]
    (out / "per_image_test.json").write_text(json.dumps(per_image))
    metrics = {"BLEU-1": 0.7, "BLEU-2": 0.5, "BLEU-3": 0.4, "BLEU-4": 0.3, "METEOR": 0.25, "ROUGE-L": 0.5,
               "CIDEr-D": float(np.mean(list(cider.values()))), "SPICE": None}
    (out / "metrics_test.json").write_text(json.dumps({
        "metrics": metrics, "unavailable": {"SPICE": "no CoreNLP models"}, "notes": [], "n_images": 6,
        "n_split_images": 6, "split": "test", "preds": str(out / "preds_test.json"), "refs": str(refs),
        "config_hash": "h", "tokenizer": "ptb", "command": "python -m eval.score_captions ..."}))
    (out / "config.yaml").write_text(json.dumps({"data": {"json": str(refs)}, "model": {"core": core}}))
    if attention:
        from eval.attention_maps import plot_attention

        words = preds[0]["caption"].split()[:3]
        alpha = np.random.default_rng(0).random((len(words), 4))
        with Image.open(refs.parent / "images" / f"{TEST_IDS[0]}.png") as im:
            plot_attention(im, words, alpha, (2, 2), out / "attention" / f"attention_{TEST_IDS[0]}.png", cols=4)
    return out


def write_stage_three(run: Path) -> None:
    data = run / "data" / "captions"
    images = [{"filepath": "images", "filename": f"{i}.png", "imgid": k, "cocoid": i, "split": "test",
               "sentences": [{"tokens": ["gt"], "raw": f"ground truth {j} of image {i}", "sentid": 10 * i + j}
                             for j in range(2)]} for k, i in enumerate(TEST_IDS)]
    for i in TEST_IDS:
        png(data / "images" / f"{i}.png", i * 20, size=40)
    refs = data / "dataset_coco.json"
    refs.write_text(json.dumps({"images": images, "dataset": "coco"}))
    feats = {}
    for name, backbone in (("img", "class-pretrained"), ("cap", "metric-learning")):
        feats[name] = run / "features" / f"{name}.h5"
        feats[name].parent.mkdir(parents=True, exist_ok=True)
        with h5py.File(feats[name], "w") as f:
            f.create_dataset("fc", data=np.zeros((1, 2), np.float16))
            f.attrs.update(backbone=backbone, complete=True)
    runs = [write_captioner(run, f"{f}_topdown{'_scst' if s == 'rl' else ''}", "topdown", feats[f], s, refs, True)
            for f in ("img", "cap") for s in ("xe", "rl")]
    runs.append(write_captioner(run, "img_att2all2", "att2all2", feats["img"], "xe", refs, attention=False))
    write_table(runs, run / "results" / "captioning",
                "python -m eval.reporting.results_table RUNS --out results/captioning")


@pytest.fixture(scope="module")
def report(tmp_path_factory):
    """The run folder built, moved (stale recorded paths), and reported on."""
    tmp = tmp_path_factory.mktemp("report")
    built = tmp / "built" / "demo"
    write_stage_one(built)
    write_stage_three(built)
    run = tmp / "moved" / "demo"
    run.parent.mkdir()
    shutil.move(built, run)
    report_main(["--run", str(run), "--examples", "4"])
    return run, run / "report"


def srcs(html: str) -> list[str]:
    return re.findall(r'<img src="([^"]+)"', html)


# ------------------------------------------------------------------------------------------ tests


def test_report_sections_tables_and_files(report):
    _, out = report
    html = (out / "index.html").read_text()
    for title in ("1. Captioning results (Table 1)", "2. Retrieval tables", "3. nDCG@K", "4. Retrieval examples",
                  "5. Embedding dimension", "6. Pose embeddings in 2-D", "7. Caption examples", "8. Attention maps"):
        assert f"<h2>{title}" in html, title
    # Table 1 in paper order, Top-Down's best CIDEr-D (Cap: 0.5 + mean of CAP_MINUS_IMG) bold
    t1 = html.split('id="1-')[1].split("<section")[0]
    assert [m for m in re.findall(r"<td>(XE|RL)</td>", t1)] == ["XE", "XE", "RL", "XE", "RL"]
    assert f'<td class="num best">{0.5 + np.mean(list(CAP_MINUS_IMG.values())):.3f}</td>' in t1
    assert (out / "data" / "captioning" / "captioning.csv").is_file() and 'href="data/captioning/captioning.csv"' in t1
    # retrieval tables with the bounds and the K columns retrieval.md uses (k = 10 here: 1, 5, 10)
    assert "<th>nDCG@10</th><th>dist@1</th>" in html and "<th>nDCG@20</th>" not in html
    assert '<tr class="bound"><td>Oracle</td><td class="num">1.000</td>' in html
    assert "tiny_pose (pose track)" in html and "tiny_layout (layout track)" in html
    # every image the page shows lies in the report folder, and nothing points outside it
    images = srcs(html)
    assert images and all((out / s).is_file() and not s.startswith(("/", "http", "..")) for s in images)
    assert "img/tiny-layout/curves.png" in images  # re-plotted from retrieval.json
    assert {"img/tiny-pose/grid_query0.png", "img/tiny-pose/grid_query1.png", "img/tiny-pose-dims/dims.png",
            "img/tiny-pose/tsne.png"} <= set(images)
    assert len([s for s in images if s.startswith("img/attention/")]) == 4
    assert "<h3>nDCG@10 by embedding dimension (tiny_pose_dims (pose track))</h3>" in html
    assert "<th>8-D</th><th>16-D</th>" in html


def test_missing_inputs_are_notes_not_broken_images(report):
    _, out = report
    html = (out / "index.html").read_text()
    assert "no caption-track retrieval study under" in html
    grids = html.split('<section id="4-')[1].split("</section>")[0]
    layout = grids.split("<h3>tiny_layout (layout track)</h3>")[1]
    assert 'class="missing"' in layout and "retrieval grids of tiny_layout" in layout and "<img" not in layout
    attention = html.split('<section id="8-')[1].split("</section>")[0]
    att2all2 = attention.split("<h3>Att2all2 / Img / XE</h3>")[1].split("<h3>")[0]
    assert 'class="missing"' in att2all2 and "<img" not in att2all2
    assert html.count('class="missing"') == 4  # the three above, and section 9's: this run has no text side
    text_side = html.split('<section id="9-')[1].split("</section>")[0]
    assert text_side.count('class="missing"') == 1 and "results/joint/" in text_side


def test_tsne_keeps_the_label_structure_of_the_log_ratio_embedding(report):
    html = (report[1] / "index.html").read_text()
    ratios = [float(v) for v in re.findall(r'data-ratio="([0-9.]+)"', html)]
    assert len(ratios) == 2  # Untrained, then the log-ratio row
    assert ratios[1] < 0.6 < ratios[0], ratios


def test_map_titles_stay_over_their_own_panels():
    from eval.reporting.figures import draw_maps

    xy = np.random.default_rng(0).standard_normal((20, 2))
    long = "log-ratio + dense triplet mining, caption labels by WMD (128-D)\nneighbour label ratio 0.53"
    fig = draw_maps([("Untrained ResNet-10 (128-D)\nneighbour label ratio 0.98", xy), (long, xy), (long, xy)], None, "")
    fig.canvas.draw()
    renderer = fig.canvas.get_renderer()
    boxes = [ax.title.get_window_extent(renderer) for ax in fig.axes]
    panels = [ax.get_window_extent(renderer) for ax in fig.axes]
    gap = (panels[1].x0 - panels[0].x1) / 2  # half the space between two panels
    for title, panel in zip(boxes, panels):  # the pose t-SNE's titles ran into each other (issue #48)
        assert panel.x0 - gap <= title.x0 and title.x1 <= panel.x1 + gap, (title, panel)
    assert all(not a.overlaps(b) for a, b in zip(boxes, boxes[1:]))


def test_caption_examples_are_the_largest_cap_img_differences(report):
    html = (report[1] / "index.html").read_text()
    assert re.findall(r"<h3>Image (\d+)", html) == ["102", "104", "105", "103"]
    assert "ground truth 1 of image 102" in html and "Cap rl caption of image 102" in html
    assert "Cap − Img CIDEr-D +0.90" in html


def test_chromium_loads_every_image(report):
    need_chromium()
    _, out = report
    html = (out / "index.html").read_text()
    result = report_check.check_page(out / "index.html")
    assert result.loaded == result.total == len(srcs(html)) > 10
    assert result.tables == html.count("<table") == 8  # Table 1, 2 retrieval, 1 sweep (K=10), 4 examples


def test_a_broken_image_fails_the_check(report, tmp_path, capsys):
    need_chromium()
    broken = tmp_path / "broken"
    shutil.copytree(report[1], broken)
    page = broken / "index.html"
    page.write_text(page.read_text().replace("</main>", '<img src="img/nowhere.png"></main>'))
    with pytest.raises(SystemExit) as exit_info:
        run_cli(lambda: report_check.main([str(page)]))
    assert exit_info.value.code == 2
    err = capsys.readouterr().err.strip()
    assert "1 of " in err and "did not load (img/nowhere.png)" in err and "\n" not in err


def test_check_needs_the_counts_and_no_network():
    with pytest.raises(CapawareError, match="load script did not run"):
        check_dom("<html><body><img src='a.png'></body></html>")
    with pytest.raises(CapawareError, match="network"):
        check_dom('<html><body data-report-loaded="1"><img src="https://cdn.example/x.png"></body></html>')
    ok = ('<body data-report-loaded="1" data-images-loaded="2" data-images-total="2" data-tables-rendered="1" '
          'data-tables-expected="1" data-images-failed="[]">')
    assert check_dom(ok).loaded == 2
    with pytest.raises(CapawareError, match="tables"):
        check_dom(ok.replace('data-tables-expected="1"', 'data-tables-expected="3"'))


def test_report_replaces_only_its_own_folder(report, tmp_path, monkeypatch):
    run, out = report
    (out / "stale.txt").write_text("from an older report")
    report_main(["--run", str(run), "--examples", "4"])  # rewritten whole, not merged
    assert not (out / "stale.txt").exists() and (out / "index.html").is_file()
    assert not [p for p in out.parent.iterdir() if p.name.startswith(".report")]
    other = tmp_path / "mine"
    other.mkdir()
    (other / "keep.txt").write_text("x")
    with pytest.raises(CapawareError, match="not a report folder"):
        report_main(["--run", str(run), "--out", str(other)])
    assert (other / "keep.txt").is_file()
    monkeypatch.setenv("CHROMIUM", "/nonexistent/chrome")
    with pytest.raises(CapawareError, match="apt-get install chromium"):
        report_check.find_chromium()
