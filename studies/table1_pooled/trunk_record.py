"""One finished trunk of Table 1's pooled study, kept in the repository (issue #56):
``python -m studies.table1_pooled.trunk_record RUN TRUNK --machine TEXT --seconds S``.

A trunk's run folder holds gigabytes (checkpoints, features); what the table needs of it is small: each run's CIDEr-D
and its per-image CIDEr-D on the test split. ``write_record`` gathers them from the per-seed tables
studies/table1_seeds/table1_seeds.sh wrote (``RUN/t<T>/results/table1/s<seed>/captioning.json``) into one compressed
file, ``docs/study_results/table1_pooled/trunk_<T>.npz``, with the declaration's stamp, the CPU that ran it, the wall
time of the sitting that finished it (``seconds``), when the trunk first started (``started``, from its data
stage's log) and the commit that wrote it (``commit``, ``dirty``: studies.provenance; records kept before issue #65
lack them): a trunk resumed over several sittings ran for less than ``started`` to now and more than ``seconds``. So
a study longer than one sitting is resumed on another machine from the records committed so far, and the table
(studies.table1_pooled.pooled_table) reads them all.
"""
from __future__ import annotations

import argparse
import io
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from capcore.atomic import atomic_path
from capcore.errors import CapawareError, run_cli
from studies.provenance import computed_at
from studies.table1_pooled.declaration import (DEFAULT, MODELS, ROOT, TRAINING, declaration_stamp,
                                               load_declaration)
from studies.table1_seeds.results_seeds import per_image_scores, read_table

RECORDS = ROOT / "docs" / "study_results" / "table1_pooled"


@dataclass
class TrunkRecord:
    trunk: int
    seeds: list[int]
    arms: list[str]
    image_ids: np.ndarray
    scores: np.ndarray  # [seed, arm, model, training]: each run's CIDEr-D as its Table 1 row prints it
    per_image: np.ndarray  # [seed, arm, model, training, image]: its per-image CIDEr-D
    machine: str
    seconds: float  # the wall time of the sitting that finished the trunk
    started: str = ""  # when its first sitting began (UTC, ISO 8601), from RUN/tT/logs/data.log; "" if unknown
    stamp: str = ""  # the declaration's stamp when the record was written (studies/table1_pooled/declared_stamp.txt)
    commit: str = ""  # the commit of the code that wrote the record ("" in records kept before issue #65)
    dirty: bool = False  # whether that checkout's tracked files differed from the commit


def gather(run: Path, trunk: int, decl) -> TrunkRecord:
    """A finished trunk's scores from its run folder; one line naming the missing table or per-image file."""
    seeds, arms = decl.captioner_seeds_of(trunk), list(decl.arms)
    scores, per_image, ids = [], [], None
    for s in seeds:
        path = run / f"t{trunk}" / "results" / "table1" / f"s{s}" / "captioning.json"
        if not path.is_file():
            raise CapawareError(path, f"trunk {trunk}, captioner seed {s} has no Table 1 yet",
                                f"run bash studies/table1_pooled/study_pooled.sh {run} {trunk} (it resumes)")
        table = read_table(path)
        for key in ((m, a, t) for a in arms for m in MODELS for t in TRAINING):
            row = table.get(key)
            per = per_image_scores(row) if row else None
            if per is None:
                raise CapawareError(path, f"no per-image CIDEr-D for {' '.join(key)}", "rerun that trunk's captioners")
            ids = ids or sorted(per)
            scores.append(float(row["C"]))
            per_image.append([per[i] for i in ids])
    shape = (len(seeds), len(arms), len(MODELS), len(TRAINING))
    return TrunkRecord(trunk, seeds, arms, np.array(ids), np.array(scores).reshape(shape),
                       np.asarray(per_image, np.float32).reshape(*shape, len(ids)), "", 0.0)


def write_record(record: TrunkRecord, folder: Path = RECORDS) -> Path:
    """The record as ``folder/trunk_<T>.npz``, with the commit that writes it (unless it already names one)."""
    if not record.commit:
        at = computed_at()
        record.commit, record.dirty = at["commit"], bool(at["dirty"])
    path = folder / f"trunk_{record.trunk}.npz"
    buffer = io.BytesIO()
    np.savez_compressed(buffer, trunk=record.trunk, seeds=np.array(record.seeds), arms=np.array(record.arms),
                        models=np.array(MODELS), training=np.array(TRAINING), image_ids=record.image_ids,
                        scores=record.scores, per_image=record.per_image, machine=record.machine,
                        seconds=record.seconds, started=record.started, stamp=record.stamp, commit=record.commit,
                        dirty=record.dirty)
    with atomic_path(path) as tmp:
        tmp.write_bytes(buffer.getvalue())
    return path


def read_record(path: Path) -> TrunkRecord:
    with np.load(path) as f:
        return TrunkRecord(int(f["trunk"]), f["seeds"].tolist(), f["arms"].tolist(), f["image_ids"], f["scores"],
                           f["per_image"], str(f["machine"]), float(f["seconds"]),
                           str(f["started"]) if "started" in f else "", str(f["stamp"]) if "stamp" in f else "",
                           str(f["commit"]) if "commit" in f else "", bool(f["dirty"]) if "dirty" in f else False)


def first_start(run: Path, trunk: int) -> str:
    """When the trunk's first sitting began: the time on the first stage header of its data stage's log
    (``# 2026-11-29T00:41:00Z stage data, ...``, written by capaware/pipeline.sh); "" without one."""
    log = run / f"t{trunk}" / "logs" / "data.log"
    if log.is_file():
        with open(log, encoding="utf-8", errors="replace") as f:
            first = f.readline().split()
        if len(first) >= 3 and first[0] == "#" and first[2] == "stage":
            return first[1]
    return ""


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(prog="python -m studies.table1_pooled.trunk_record",
                                     description=__doc__.splitlines()[0])
    ap.add_argument("run", type=Path)
    ap.add_argument("trunk", type=int)
    ap.add_argument("--machine", required=True, help="the CPU (or device) that ran the trunk")
    ap.add_argument("--seconds", type=float, required=True, help="the wall time of the sitting that finished it")
    ap.add_argument("--declaration", type=Path, default=DEFAULT)
    ap.add_argument("--records", type=Path, default=RECORDS)
    a = ap.parse_args(argv)
    record = gather(a.run, a.trunk, load_declaration(a.declaration))
    record.machine, record.seconds, record.started = a.machine, a.seconds, first_start(a.run, a.trunk)
    record.stamp = declaration_stamp(a.declaration)
    print(f"kept trunk {a.trunk}: {write_record(record, a.records)}")


if __name__ == "__main__":
    run_cli(main)
