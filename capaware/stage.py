"""One pipeline command: ``python -m capaware.stage {data,stage1,features,xe,scst} CONFIG [key=value ...]``.

The pipeline (capaware/pipeline.sh, planned by capaware.pipeline_plan) runs each stage's work as these
commands, so that they live in the package and run from a non-editable install (issue #48):

- ``data``: generate (the embedded default) and check every file of a stage-one config's dataset, and of its
  class-pretraining set (capdata.prepare); ``--only track|pretrain`` checks one of the two;
- ``stage1``: train every method of a stage-one config, evaluate retrieval, write its tables (embedder.rows);
- ``features``: dump a backbone's att/fc features to HDF5, then verify them, in one process (feature_extract);
- ``xe``: cross-entropy training (captioners.xe; labels.h5 / vocab.json written on first use);
- ``scst``: self-critical training from the matching XE run's best.pt (rl.scst).

After ``xe`` or ``scst``, in the same process: beam-2 captions of the test split with their attention
(captioners.predict), caption metrics (eval.score_captions: pycocoevalcap, discriminativeness), the
grounding check (eval.grounding) and per-word attention pictures of 4 test images (eval.attention_maps),
into the config's out_dir, named by capcore.run_layout.CaptionerDir. One process instead of one per step:
each Python start that imports torch costs seconds, and the demo runs eight of these.

Under ``capaware run --nproc N`` the pipeline sets ``CAPAWARE_LAUNCH`` (capcore.launch, torchrun): stage one,
XE and SCST then start again under it, one process per rank. Reruns resume training (a finished run is not
retrained) and redo the cheap steps. XE and SCST default to one thread per process (the LSTMs are small;
set OMP_NUM_THREADS to change it).
"""
from __future__ import annotations

import os
import shlex
import sys

from capaware.stages import TABLE, kinds, resolve
from capcore.errors import CapawareError

KINDS = tuple(kinds(TABLE))
"""The kinds, and what each runs (``Stage.run``), are the stage table's (capaware/stages.py)."""
LAUNCHED = tuple(k for k, s in kinds(TABLE).items() if s.distributed)
"""The kinds that train with capcore.distributed, so run under torchrun when the pipeline asks for it."""
USAGE = f"usage: python -m capaware.stage {{{','.join(KINDS)}}} CONFIG [key=value ...]"


def relaunch(argv: list[str]) -> None:
    """Start this command again under ``$CAPAWARE_LAUNCH`` (torchrun), unless it already runs under it."""
    launch = os.environ.get("CAPAWARE_LAUNCH", "")
    if launch and argv[0] in LAUNCHED and "TORCHELASTIC_RUN_ID" not in os.environ:
        sys.stdout.flush()
        command = [*shlex.split(launch), "-m", "capaware.stage", *argv]
        os.execvp(command[0], command)


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


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    asked = {"-h", "--help"} & set(argv)  # data, stage1 and features answer it with their own options
    known = kinds(TABLE)
    if asked and (len(argv) < 2 or argv[1] in asked or (argv[0] in known and not known[argv[0]].kind_options)):
        print(__doc__.strip())
        return
    if len(argv) < 2 or argv[0] not in known:
        raise CapawareError("capaware.stage", f"needs a kind ({', '.join(KINDS[:-1])} or {KINDS[-1]}) and a config",
                            USAGE)
    relaunch(argv)
    kind, config, rest = argv[0], argv[1], argv[2:]
    module, _, name = known[kind].run.partition(":")
    # the table's capaware.stage functions are this module's own (run as __main__: not imported a second time)
    run = globals()[name] if module == "capaware.stage" else resolve(known[kind].run)
    run(config, rest)


if __name__ == "__main__":
    from capcore.errors import run_cli

    run_cli(main)
