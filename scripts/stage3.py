"""Stage three for one captioner config, in one process:
``python scripts/stage3.py {xe,scst} CONFIG [key=value ...]`` (scripts/stage3_captioners.sh and
scripts/stage3_rl.sh call it).

xe: cross-entropy training (captioners.xe; labels.h5 / vocab.json written on first use) ->
scst: self-critical training from the matching XE run's best.pt (rl.train) ->
then, for either, beam-2 captions of the test split with their attention (captioners.predict) -> caption
metrics (eval.score_captions: pycocoevalcap, discriminativeness) -> the grounding check (eval.grounding) ->
per-word attention pictures of 4 test images (eval.attention_maps). Outputs in the config's out_dir,
named by capcore.run_layout.CaptionerDir::

    best.pt last.pt config.yaml manifest.json history.json tb/ preds_test.json preds_test.meta.json
    metrics_test.json per_image_test.json grounding_test.json attention_test.h5 attention/attention_<image_id>.png

One process instead of one per step: each Python start that imports torch costs seconds, and stage
three runs eight of these in the demo. The config is read by its stage's own loader (one error line for
a bad key or value). Reruns resume training (a finished run is not retrained) and redo the cheap steps.
"""
from __future__ import annotations

import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))  # run from a checkout without installing

from capcore import distributed  # noqa: E402
from capcore.errors import CapawareError, run_cli  # noqa: E402
from capcore.run_layout import CaptionerDir  # noqa: E402
from captioners import predict  # noqa: E402
from captioners import xe  # noqa: E402
from captioners.config import load_captioner_config  # noqa: E402
from eval import attention_maps, grounding, score_captions  # noqa: E402
from rl import train as scst  # noqa: E402
from rl.config import load_scst_config  # noqa: E402

USAGE = "usage: scripts/stage3.py {xe,scst} CONFIG [key=value ...]"


def main(argv: list[str] | None = None) -> None:
    argv = sys.argv[1:] if argv is None else argv
    if len(argv) < 2 or argv[0] not in ("xe", "scst"):
        raise CapawareError("scripts/stage3.py", "needs a kind (xe or scst) and a config", USAGE)
    kind, config, overrides = argv[0], argv[1], argv[2:]
    if kind == "xe":
        cfg = load_captioner_config(config, overrides)
        trainer = xe.train
    else:
        cfg = load_scst_config(config, overrides)
        trainer = scst.train
    trainer(cfg)  # a simulated kill (train.stop_after_steps) unwinds to run_cli, which exits 3
    distributed.leave()
    if distributed.launched_rank() != 0:  # under torchrun (pipeline.sh --nproc) rank 0 alone decodes and scores
        return
    run, refs = CaptionerDir(cfg.out_dir), cfg.data.json
    predict.main(["--checkpoint", str(run.best), "--split", "test", "--method", "beam", "--beam-size", "2",
                  "--out", str(run.preds("test")), "--attention", str(run.attention("test"))])
    score_captions.main(["--preds", str(run.preds("test")), "--refs", refs, "--format", cfg.data.format,
                         "--split", "test", "--out", str(run.metrics("test")), "--per-image", str(run.per_image("test"))])
    grounding.main([str(run.root), "--split", "test", "--out", str(run.grounding("test"))])
    attention_maps.main(["--attention", str(run.attention("test")), "--refs", refs, "--format", cfg.data.format,
                         "--out", str(run.attention_pictures), "--n", "4"])

if __name__ == "__main__":
    run_cli(main)
