"""The linear probes against stage-one training steps: does the caption track write colour (or count, place) into
the trunk, and when? The positive control of issue #35.

``python -m studies.probes.probe_curve CAPTION_CONFIG [key=value ...] --every N [--groups colour count ...]``

Runs the config's caption track as ``embedder.rows`` does (class pretraining per ``pretrain.targets``, then every
row of ``methods``), and every N optimiser steps (and before the first) embeds every image of the caption set
with the trunk (pooled layer4, as stage two's ``fc``) and fits ``studies.probes.probe``'s linear probes on them: train +
restval fit, val chooses the L2 strength, test scores. Written to OUT_DIR/probe_curve.{json,md} (one row per row
and step; the JSON keeps each point's val accuracy too, ``probe_val``, for choices such as a step budget) and
TensorBoard (``probe/<group>`` and ``probe_val/<group>`` under each row's tb/probe/). E.g. the colour-blind start
(``pretrain.targets=identity_shape``) with the whole trunk trained::

    python -m studies.probes.probe_curve studies/probes/configs/probe_caption.yaml run_dir=runs/demo \\
        out_dir=runs/demo/curve \\
        pretrain.targets=identity_shape train.freeze=none train.epochs=4 --every 150

Probing does not disturb training: the model's modes are restored, and the probe's seeded fit runs on a forked
torch RNG, so a curve's last weights equal an unprobed run's.
"""
from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path

import numpy as np
import torch

from capcore.atomic import write_text
from capcore.device import pick_device
from capcore.distributed import summary_writer
from capcore.errors import run_cli
from capcore.run_layout import StudyDir
from embedder.config import load_config, slug
from capdata.formats import read_records
from embedder.data import ImageBank
from embedder.model import build_model
from embedder.rows import embed, resolve_init
from embedder.row_labels import row_labels
from embedder.track import prepare_track
from embedder.train import train_method
from studies.probes.probe import probed_tags, majority, probe_group, standardise, targets

GROUPS = ("colour", "count", "position", "shape", "size")


class Prober:
    """Pooled trunk features of every caption-set image -> test accuracy per group."""

    def __init__(self, cfg, groups: tuple[str, ...]):
        records = read_records(cfg.data)
        self.bank = ImageBank.build(records, cfg.data.input_size, cfg.data.in_memory, desc="probe images")
        self.device = pick_device(cfg.device)
        tags = probed_tags(records)
        self.split = {"train": np.isin(records.splits, ["train", "restval"]), "val": records.splits == "val",
                      "test": records.splits == "test"}
        self.groups = {g: targets(tags, g) for g in groups}
        self.floor = {g: majority({s: y[m] for s, m in self.split.items()}) for g, (y, _) in self.groups.items()}

    def __call__(self, model) -> dict[str, dict[str, float]]:
        """{"test": accuracy per group, "val": the val accuracy of the L2 strength val chose} (val is what a
        budget may be chosen on; test is never used to choose)."""
        modes = [m.training for m in model.modules()]
        with torch.random.fork_rng(devices=[]):
            fc = embed(model, self.bank, np.arange(len(self.bank)), self.device, trunk_only=True).astype(np.float64)
            xs = standardise({s: fc[m] for s, m in self.split.items()})
            fits = {g: probe_group(xs, {s: y[m] for s, m in self.split.items()}, names)
                    for g, (y, names) in self.groups.items()}
        for m, mode in zip(model.modules(), modes):
            m.training = mode
        return {split: {g: fit[split] for g, fit in fits.items()} for split in ("test", "val")}


def markdown(rows: list[dict], floor: dict[str, float], command: str) -> str:
    groups = list(floor)
    lines = ["| row | step | " + " | ".join(groups) + " |", "|---|---:|" + "---:|" * len(groups),
             "| majority (floor) | | " + " | ".join(f"{floor[g]:.3f}" for g in groups) + " |"]
    lines += [f"| {r['row']} | {r['step']} | " + " | ".join(f"{r['probe'][g]:.3f}" for g in groups) + " |"
              for r in rows]
    return "\n".join(lines) + ("\n\nTest accuracy of linear probes on the pooled trunk features "
                               f"(studies.probes.probe). `{command}`\n")


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("config")
    parser.add_argument("overrides", nargs="*")
    parser.add_argument("--every", type=int, default=100, help="probe every this many optimiser steps")
    parser.add_argument("--groups", nargs="+", default=list(GROUPS), choices=GROUPS)
    a = parser.parse_args(argv)
    cfg = load_config(a.config, a.overrides)
    out = Path(cfg.out_dir)
    track = prepare_track(cfg)
    cfg = resolve_init(cfg, track, progress=True)
    prober = Prober(cfg, tuple(a.groups))
    command = " ".join(["python -m studies.probes.probe_curve", *argv])
    rows: list[dict] = []
    writers: dict[str, object] = {}

    def record(row: str, step: int, model) -> None:
        probes = prober(model)
        rows.append({"row": row, "step": step, "probe": probes["test"], "probe_val": probes["val"]})
        tb = out / "tb" if row == "start" else StudyDir(out).method(slug(row)).root / "tb"
        writer = writers.setdefault(row, summary_writer(str(tb / "probe"), purge_step=None))  # beside training's
        for split, name in (("test", "probe"), ("val", "probe_val")):
            for g, v in probes[split].items():
                writer.add_scalar(f"{name}/{g}", v, step)
        writer.flush()
        print(f"{row} step {step}: " + ", ".join(f"{g} {v:.3f}" for g, v in rows[-1]["probe"].items()), flush=True)
        write_text(out / "probe_curve.json", json.dumps({"command": command, "floor": prober.floor, "rows": rows},
                                                         indent=1))
        write_text(out / "probe_curve.md", markdown(rows, prober.floor, command))

    torch.manual_seed(cfg.seed)
    record("start", 0, build_model(cfg.model.arch, cfg.model.embed_dim, cfg.model.init, cfg.model.weights)
           .to(prober.device))
    for method in cfg.methods:
        train_method(cfg, method, StudyDir(out).method(slug(method.name)).root, track.train_bank,
                     *row_labels(track, cfg, method.labels), on_step=lambda step, model, name=method.name:
                     record(name, step, model) if step % a.every == 0 else None)
    for writer in writers.values():
        writer.close()
    print(markdown(rows, prober.floor, command))


if __name__ == "__main__":
    run_cli(main)
