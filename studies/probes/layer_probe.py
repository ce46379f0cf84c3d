"""Which stage of a trunk still separates an attribute? Linear probes on each stage's pooled map.

``python -m studies.probes.layer_probe --checkpoint CKPT --karpathy DATA/dataset_coco.json [--groups colour shape]
[--size 128]``

For a stage-one or class-pretrained checkpoint, every caption-set image goes through the trunk; after the stem
and after each of layer1 to layer4 the map is averaged over space and ``studies.probes.probe``'s linear probes are
fitted on it (train + restval fit, val chooses the L2 strength, test scores). A group read well early and poorly at
layer4 was there and was discarded on the way up: a stage one that should bring it back has to retrain the
stages that drop it, not find it anew. Prints a Markdown table.
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
import torch
from omegaconf import OmegaConf

from capcore.checkpoint import load_checkpoint
from capcore.errors import run_cli
from capdata.config import DataConfig
from capdata.captions import in_split, read_captions
from capdata.formats import read_records
from embedder.data import ImageBank
from embedder.model import build_model
from studies.probes.probe import probed_tags, majority, probe_group, standardise, targets

STAGES = ("stem", "layer1", "layer2", "layer3", "layer4")


@torch.inference_mode()
def stage_features(model, bank: ImageBank, batch: int = 128) -> dict[str, np.ndarray]:
    """Per stage, [N, C] the spatial mean of its output map."""
    t = model.trunk.eval()
    modules = [torch.nn.Sequential(t.conv1, t.bn1, t.relu, t.maxpool), t.layer1, t.layer2, t.layer3, t.layer4]
    out: dict[str, list[np.ndarray]] = {s: [] for s in STAGES}
    for start in range(0, len(bank), batch):
        x = bank.batch(np.arange(start, min(start + batch, len(bank))))
        for name, module in zip(STAGES, modules):
            x = module(x)
            out[name].append(x.float().mean((2, 3)).numpy())
    return {s: np.concatenate(v).astype(np.float64) for s, v in out.items()}


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--karpathy", required=True)
    parser.add_argument("--groups", nargs="+", default=["colour", "shape", "count", "position"])
    parser.add_argument("--size", type=int, default=128, help="input pixels (the trunk's training size)")
    a = parser.parse_args(argv)
    state = load_checkpoint(a.checkpoint)
    model = build_model(state["arch"], int(state.get("embed_dim") or 8), a.checkpoint)
    data = OmegaConf.structured(DataConfig(track="caption", format="karpathy", root=str(Path(a.karpathy).parent),
                                           annotation=Path(a.karpathy).name, input_size=a.size))
    bank = ImageBank.build(read_records(data), a.size, True, desc="images")
    records = read_captions(a.karpathy)
    tags = probed_tags(records)
    split = {"train": np.isin(np.arange(len(records)), in_split(records, "train")), "val": records.splits == "val",
             "test": records.splits == "test"}
    feats = stage_features(model, bank)
    print(f"Linear probes on each stage's pooled map of {a.checkpoint} (test accuracy)\n")
    print("| stage | " + " | ".join(a.groups) + " |\n|---|" + "---:|" * len(a.groups))
    ys = {g: targets(tags, g) for g in a.groups}
    print("| majority (floor) | " + " | ".join(
        f"{majority({s: ys[g][0][m] for s, m in split.items()}):.3f}" for g in a.groups) + " |")
    for stage in STAGES:
        xs = standardise({s: feats[stage][m] for s, m in split.items()})
        accs = [probe_group(xs, {s: ys[g][0][m] for s, m in split.items()}, ys[g][1])["test"] for g in a.groups]
        print(f"| {stage} | " + " | ".join(f"{v:.3f}" for v in accs) + " |", flush=True)


if __name__ == "__main__":
    run_cli(main)
