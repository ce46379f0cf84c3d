"""The pipeline's data stage: ``python -m embedder.prepare --config CONFIG [key=value ...]``.

Generates the embedded default (and the class-pretraining set, ``pretrain.data``) when the config
names one and its folder is missing, then reads the whole dataset once with the real reader, so a
missing or malformed annotation file stops the pipeline here, in one line, before any training starts.
"""
from __future__ import annotations

import argparse
from collections import Counter

from embedder.config import load_config
from embedder.data import read_records
from embedder.errors import run_cli


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m embedder.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    records = read_records(cfg.data)
    splits = ", ".join(f"{name} {count}" for name, count in sorted(Counter(map(str, records.splits)).items()))
    print(f"{cfg.data.root}: {len(records.splits)} {cfg.data.track} images ({splits})")
    if cfg.pretrain.data is not None and cfg.model.init == "class-pretrained":
        pre = read_records(cfg.pretrain.data)
        print(f"{cfg.pretrain.data.root}: {len(pre.splits)} class-pretraining images")


if __name__ == "__main__":
    run_cli(main)
