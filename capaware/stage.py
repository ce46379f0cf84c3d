"""One pipeline command: ``python -m capaware.stage {data,stage1,features,xe,joint,scst} CONFIG [key=value ...]``.

The pipeline (capaware/pipeline.sh, planned by capaware.pipeline_plan) runs each stage's work as these
commands, so that they live in the package and run from a non-editable install (issue #48):

- ``data``: generate (the embedded default) and check every file of a stage-one config's dataset, and of its
  class-pretraining set (capdata.prepare); ``--only track|pretrain`` checks one of the two;
- ``stage1``: train every method of a stage-one config, evaluate retrieval, write its tables (embedder.rows);
- ``features``: dump a backbone's att/fc features to HDF5, then verify them, in one process (feature_extract);
- ``xe``: cross-entropy training (captioners.xe; labels.h5 / vocab.json written on first use);
- ``joint``: a joint image-text space on one feature set, then its test split's R@K (joint.train; reads XE's
  labels.h5 / vocab.json);
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
    resolve(known[kind].run)(config, rest)  # capaware/stage_runners.py


if __name__ == "__main__":
    from capcore.errors import run_cli

    run_cli(main)
