"""Stage one: capaware's training step against a plain torchvision loop, and several anchors per batch
against the paper's one.

``python benchmarks/bench_stage1_overhead.py [--threads 2] [--part overhead anchors] [--run DIR]``

Both parts run on the demo's pose track (``configs/demo/demo_pose.yaml``: the synthetic pose set, generated
into ``--run`` when missing; ResNet-18 at 64 px, batch 96, bfloat16 autocast, channels_last, SGD) with
its log-ratio + dense row.

* **overhead**: ``embedder.train.train_method`` -- the real loop: sampler, label distances, dense
  mining, log-ratio loss, DataLoader, logging, checkpoints every 50 steps -- run for ``--steps`` and
  for 3x as many; its time per step is the difference over the step difference, so setup, the graph
  and the final checkpoint cancel. The plain loop is what a torchvision user writes for the same
  model, batch, precision, memory layout and optimiser, on batches of 96 random images of the same
  bank made ready beforehand (so it times the model alone): forward, the squared norm of the
  embedding as the loss, backward, SGD. Overhead = ours / plain - 1: what capaware's data pipeline,
  sampler, label distances, mining and loss add to the model's own step.
* **anchors**: the same row trained for ``--epochs`` with one anchor per batch (Kim et al.: anchor +
  its 5 label-nearest neighbours + random others) and with the demo's 8 anchors per batch, at the
  demo's learning rate (chosen for 8 anchors on the sweep set; the one-anchor run uses it too). The
  test queries' nDCG@10 is measured every ``--points``-th of each run; its time axis counts training
  seconds only (evaluation excluded). Reported: the one-anchor run's final (and its best) nDCG@10 and
  the training seconds the 8-anchor run needed to reach it, as a fraction of the one-anchor run's.
"""
from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import torch

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))
sys.path.insert(0, str(ROOT / "benchmarks"))

from capcore.cpu_isa import cpu_line  # noqa: E402
from bench_stage1_precision import model_step  # noqa: E402

from capcore.device import pick_precision  # noqa: E402
from embedder.config import load_config  # noqa: E402
from embedder.data import ImageBank  # noqa: E402
from embedder.model import build_model  # noqa: E402
from embedder.retrieval import ndcg_at_k, retrieve  # noqa: E402
from embedder.rows import embed, oracle  # noqa: E402
from embedder.track import prepare_track  # noqa: E402
from embedder.train import memory_format, train_method  # noqa: E402

CONFIG = ROOT / "configs" / "demo" / "demo_pose.yaml"


def pose_config(run: Path, overrides: list[str] = ()):
    return load_config(CONFIG, [f"run_dir={run}", "train.head_warmup_steps=0", *overrides])


def log_ratio_row(cfg, **changes):
    method = next(m for m in cfg.methods if m.loss == "log_ratio" and m.mining == "dense").copy()
    for key, value in changes.items():
        setattr(method, key, value)
    return method


def timed_train(cfg, track, method, out: Path, on_step=None) -> float:
    shutil.rmtree(out, ignore_errors=True)
    start = time.perf_counter()
    train_method(cfg, method, out, track.train_bank, track.train_space, track.graph.nn_idx, progress=False,
                 on_step=on_step)
    return time.perf_counter() - start


def plain_step_seconds(cfg, bank, steps: int) -> float:
    """Seconds per step of the plain torchvision loop (see module doc), median of ``steps``."""
    device = torch.device("cpu")
    dtype = pick_precision(cfg.train.precision, device)
    layout = memory_format()
    torch.manual_seed(0)
    model = build_model(cfg.model.arch, cfg.model.embed_dim, cfg.model.init, "").to(memory_format=layout)
    opt = torch.optim.SGD(model.parameters(), lr=0.001, momentum=cfg.train.momentum,
                          weight_decay=cfg.train.weight_decay)
    rng = np.random.default_rng(0)
    inputs = [bank.batch(np.sort(rng.choice(len(bank), cfg.train.batch_size, replace=False)), device)
              .contiguous(memory_format=layout) for _ in range(4)]  # ready batches: the model's time alone
    model.train()
    times = []
    for i in range(steps + 2):
        start = time.perf_counter()
        model_step(model, opt, inputs[i % len(inputs)], dtype)
        times.append(time.perf_counter() - start)
    return float(np.median(times[2:]))


def overhead(run: Path, steps: int) -> dict:
    cfg = pose_config(run)
    track = prepare_track(cfg)
    per_epoch = len(track.train_bank) // cfg.train.anchors_per_batch  # every training image anchors once
    short = timed_train(cfg, track, log_ratio_row(cfg, epochs=steps / per_epoch), run / "bench_short")
    long = timed_train(cfg, track, log_ratio_row(cfg, epochs=3 * steps / per_epoch), run / "bench_long")
    ours = (long - short) / (2 * steps)
    plain = plain_step_seconds(cfg, track.train_bank, steps)
    return {"ours_s": ours, "plain_s": plain, "overhead": ours / plain - 1, "steps": [steps, 3 * steps]}


def anchors_curves(run: Path, epochs: float, points: int) -> dict:
    cfg = pose_config(run)
    track = prepare_track(cfg)
    k = 10
    _, ideal = oracle(track, k, exclude_self=False, cfg=cfg)
    eval_bank = ImageBank.build(track.eval_records, cfg.data.input_size, cfg.data.in_memory, desc="eval images")
    curves = {}
    for anchors in (1, 8):
        total = int(round(epochs * len(track.train_bank) / anchors))
        every = max(1, total // points)
        curve, spent = [], [0.0]
        start = time.perf_counter()

        def on_step(step, model, every=every, curve=curve, spent=spent, start=start, total=total):
            if step % every and step != total:
                return
            t0 = time.perf_counter()
            train_seconds = t0 - start - spent[0]  # set-up included, earlier evaluations not
            was = model.training
            qe = embed(model, eval_bank, track.query_idx, torch.device("cpu"))
            de = embed(model, eval_bank, track.db_idx, torch.device("cpu"))
            model.train(was)
            got = retrieve(qe, de, k)
            dist = np.stack([track.eval_space.pairwise(track.query_idx[i:i + 1], track.db_idx[got[i]])[0]
                             for i in range(len(got))])
            curve.append((step, train_seconds, float(ndcg_at_k(dist, ideal)[k - 1])))
            spent[0] += time.perf_counter() - t0

        method = log_ratio_row(cfg, epochs=epochs, anchors_per_batch=anchors)
        timed_train(cfg, track, method, run / f"bench_anchors{anchors}", on_step)
        curves[anchors] = curve
    one_total = curves[1][-1][1]
    out = {"curves": curves, "one_anchor_s": one_total}
    for key, target in (("final", curves[1][-1][2]), ("best", max(v for _, _, v in curves[1]))):
        reach = next((sec for _, sec, v in curves[8] if v >= target), None)
        out[key] = {"ndcg10": target, "eight_reach_s": reach, "fraction": None if reach is None else reach / one_total}
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--part", nargs="+", default=["overhead", "anchors"], choices=["overhead", "anchors"])
    parser.add_argument("--steps", type=int, default=30, help="overhead: the short run's steps (the long: 3x)")
    parser.add_argument("--epochs", type=float, default=1.0, help="anchors: epochs of each run")
    parser.add_argument("--points", type=int, default=12, help="anchors: evaluations per run")
    parser.add_argument("--run", default=None, help="folder for the pose set and the runs (default: a temp dir)")
    parser.add_argument("--json", default=None, help="also write the results here")
    a = parser.parse_args()
    torch.set_num_threads(a.threads)
    tmp = None if a.run else tempfile.TemporaryDirectory()
    run = Path(a.run or tmp.name)
    print(f"# {shlex.join([Path(sys.executable).name, *sys.argv])}")
    print(f"# torch {torch.__version__}, {a.threads} threads, {cpu_line()}, "
          f"load average before start {os.getloadavg()[0]:.2f} (other jobs skew times)")
    out = {}
    if "overhead" in a.part:
        r = out["overhead"] = overhead(run, a.steps)
        print(f"stage-one step, demo pose (resnet18 64 px, batch 96, bfloat16): train_method {r['ours_s']:.3f} s, "
              f"plain torchvision loop {r['plain_s']:.3f} s: overhead {r['overhead']:+.1%}", flush=True)
    if "anchors" in a.part:
        r = out["anchors"] = anchors_curves(run, a.epochs, a.points)
        for anchors, curve in r["curves"].items():
            print(f"{anchors} anchor(s)/batch: " + ", ".join(f"{sec:.0f} s {v:.3f}" for _, sec, v in curve))
        for key in ("final", "best"):
            t = r[key]
            reach = ("do not reach it within their run" if t["fraction"] is None else
                     f"reach it after {t['eight_reach_s']:.0f} s, {t['fraction']:.2f} of that time")
            print(f"one anchor: {key} nDCG@10 {t['ndcg10']:.3f} (run of {r['one_anchor_s']:.0f} s of training); "
                  f"8 anchors {reach}", flush=True)
    if a.json:
        Path(a.json).write_text(json.dumps(out, indent=1))
    if tmp is not None:
        tmp.cleanup()


if __name__ == "__main__":
    main()
