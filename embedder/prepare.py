"""The pipeline's data stage: ``python -m embedder.prepare --config CONFIG [key=value ...]``.

Generates the embedded default (and the class-pretraining set, ``pretrain.data``) when the config
names one and its folder is missing, reads the whole dataset once with the real reader, then opens
every file the records point at (``capdata.check_data``: each image decodes; layout track: each
layout map reads and fits its image), so a malformed annotation, a missing or truncated image or a
misfit map stops the pipeline here, in one line naming the file and the record, before any training
starts. Prints the image count per split of each set checked.
"""
from __future__ import annotations

import argparse

from capcore.errors import CapawareError, run_cli
from capdata.check_data import check_records
from embedder.config import load_config
from capdata.formats import read_records


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m embedder.prepare", description=__doc__.splitlines()[0])
    parser.add_argument("--config", required=True)
    parser.add_argument("--only", choices=("track", "pretrain"), default=None,
                        help="only the track's set, or only the class-pretraining set (the pipeline prepares "
                        "them as two commands that can run side by side)")
    parser.add_argument("overrides", nargs="*", help="key=value config overrides")
    args = parser.parse_args(argv)
    cfg = load_config(args.config, args.overrides)
    sets = [(cfg.data, cfg.data.track)] if args.only != "pretrain" else []
    if cfg.pretrain.data is not None and cfg.model.init == "class-pretrained" and args.only != "track":
        sets.append((cfg.pretrain.data, "class-pretraining"))
    for data, what in sets:
        records = read_records(data)
        report = check_records(records, desc=f"checking {data.root}")
        print(f"{data.root}: {report.line(what)}", flush=True)
        if data is cfg.data:
            check_eval_splits(cfg, report.splits)


def check_eval_splits(cfg, splits: dict[str, int]) -> None:
    """The retrieval evaluation's query and database splits must hold images (MPII's .mat release has
    no test split of its own: without ``data.split_file`` every image is "train")."""
    for key in ("query_split", "db_split"):
        split = getattr(cfg.eval, key)
        if not splits.get(split):
            found = ", ".join(f"{name} {count}" for name, count in splits.items())
            raise CapawareError(f"eval.{key}", f"split {split!r} has no images in {cfg.data.root} (splits: {found})",
                                "set eval.query_split / eval.db_split to a split that exists"
                                + (", or give data.split_file" if cfg.data.format == "mpii" else ""))


if __name__ == "__main__":
    run_cli(main)
