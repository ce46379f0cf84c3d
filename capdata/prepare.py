"""The pipeline's data stage: ``python -m capaware.stage data CONFIG [key=value ...] [--only track|pretrain]``.

Generates the embedded default (and the class-pretraining set, ``pretrain.data``) when the config
names one and its folder is missing, reads the whole dataset once with the real reader, then opens
every file the records point at (``capdata.check_data``: each image decodes; layout track: each
layout map reads and fits its image), so a malformed annotation, a missing or truncated image or a
misfit map stops the pipeline here, in one line naming the file and the record, before any training
starts. Prints the image count per split of each set checked.

The stage reads the data sections of a stage-one config (capaware.stage loads it with stage one's loader);
what it does with them is data work alone, so it lives here, below every stage.
"""
from __future__ import annotations

from capcore.errors import CapawareError
from capdata.check_data import check_records
from capdata.config import DataConfig
from capdata.formats import read_records


def prepare(sets: list[tuple[DataConfig, str]], needed_splits: dict[str, str]) -> None:
    """Check each ``(data section, what it is)``; the first set's splits must hold images for ``needed_splits``
    (config key -> split, e.g. the retrieval evaluation's ``eval.query_split``)."""
    for i, (data, what) in enumerate(sets):
        records = read_records(data)
        report = check_records(records, desc=f"checking {data.root}")
        print(f"{data.root}: {report.line(what)}", flush=True)
        if i == 0 and needed_splits:
            check_splits(data, report.splits, needed_splits)


def check_splits(data: DataConfig, splits: dict[str, int], needed: dict[str, str]) -> None:
    """The splits a stage reads must hold images (MPII's .mat release has no test split of its own: without
    ``data.split_file`` every image is "train")."""
    for key, split in needed.items():
        if not splits.get(split):
            found = ", ".join(f"{name} {count}" for name, count in splits.items())
            raise CapawareError(key, f"split {split!r} has no images in {data.root} (splits: {found})",
                                "set eval.query_split / eval.db_split to a split that exists"
                                + (", or give data.split_file" if data.format == "mpii" else ""))
