"""What each ``python -m capaware.stage KIND`` command does: the functions the stage table names (``Stage.run`` in
capaware/stages.py), one per kind.

A module of their own, apart from the dispatcher (capaware/stage.py): the table names them by string so that reading
it imports no torch, and the dispatcher imports the table; were they in the dispatcher, the table's strings would lead
back into the module that imports it, a cycle no import contract could see (tests/repo/test_string_imports.py).
"""
from __future__ import annotations

import os


def captioner(kind: str, config: str, overrides: list[str]) -> None:
    from capcore import distributed
    from capcore.run_layout import CaptionerDir
    from capcore.stopwatch import Stopwatch
    from captioners import predict, xe
    from captioners.config import load_captioner_config
    from eval import attention_maps, grounding, score_captions
    from rl import scst
    from rl.config import load_scst_config

    watch = Stopwatch(kind)  # named for its run folder below
    with watch.phase("train"):
        if kind == "xe":
            cfg = load_captioner_config(config, overrides)
            xe.train(cfg)
        else:
            cfg = load_scst_config(config, overrides)
            scst.train(cfg)  # a simulated kill (train.stop_after_steps) unwinds to run_cli, which exits 3
        distributed.leave()
    if distributed.launched_rank() != 0:  # under torchrun (--nproc) rank 0 alone decodes and scores
        return
    run, refs = CaptionerDir(cfg.out_dir), cfg.data.json
    watch.label = f"{kind} {run.root.name}"
    with watch.phase("decode"):
        predict.main(["--checkpoint", str(run.best), "--split", "test", "--method", "beam", "--beam-size", "2",
                      "--out", str(run.preds("test")), "--attention", str(run.attention("test"))])
    with watch.phase("score"):
        score_captions.main(["--preds", str(run.preds("test")), "--refs", refs, "--format", cfg.data.format,
                             "--split", "test", "--out", str(run.metrics("test")),
                             "--per-image", str(run.per_image("test"))])
    with watch.phase("grounding"):
        grounding.main([str(run.root), "--split", "test", "--out", str(run.grounding("test"))])
    with watch.phase("attention"):
        attention_maps.main(["--attention", str(run.attention("test")), "--refs", refs, "--format", cfg.data.format,
                             "--out", str(run.attention_pictures), "--n", "4"])
    print(watch.line(), flush=True)


def data(config: str, args: list[str]) -> None:
    """The data stage of a stage-one config: its track's set and, when it class-pretrains, that set too."""
    import argparse

    from capdata.prepare import prepare
    from embedder.config import load_config

    parser = argparse.ArgumentParser(prog="python -m capaware.stage data CONFIG")
    parser.add_argument("--only", choices=("track", "pretrain"), default=None,
                        help="only the track's set, or only the class-pretraining set (the pipeline prepares them "
                        "as two commands that can run side by side)")
    known, overrides = parser.parse_known_args(args)
    only = known.only
    cfg = load_config(config, overrides)
    sets = [(cfg.data, cfg.data.track)] if only != "pretrain" else []
    if cfg.pretrain.data is not None and cfg.model.init == "class-pretrained" and only != "track":
        sets.append((cfg.pretrain.data, "class-pretraining"))
    needed = {"eval.query_split": cfg.eval.query_split, "eval.db_split": cfg.eval.db_split}  # retrieval's splits
    prepare(sets, needed if only != "pretrain" else {})


def stage_one(config: str, args: list[str]) -> None:
    from embedder.rows import main as study

    study(["--config", config, *args])


def features(config: str, args: list[str]) -> None:
    from feature_extract.dump import main as dump

    dump(["--config", config, "--verify", *args])  # dump, then verify, in one process


def xe(config: str, args: list[str]) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported
    captioner("xe", config, args)


def scst(config: str, args: list[str]) -> None:
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported
    captioner("scst", config, args)


def joint(config: str, args: list[str]) -> None:
    """Train a joint image-text space on one feature set and score its test split (joint.train)."""
    os.environ.setdefault("OMP_NUM_THREADS", "1")  # before torch is imported: one job per core, as XE
    from capcore.stopwatch import Stopwatch
    from joint.config import load_joint_config
    from joint.train import train

    cfg = load_joint_config(config, args)
    watch = Stopwatch(f"joint {cfg.name}")
    with watch.phase("train"):
        train(cfg)
    print(watch.line(), flush=True)
