#!/usr/bin/env bash
# Stage three, reinforcement, for one SCST config: self-critical training from the matching XE run's
# best.pt (CIDEr-D reward, best val CIDEr-D) -> beam-2 captions of the test split -> caption metrics
# (pycocoevalcap, plus discriminativeness) -> per-word attention pictures of 4 test images. The XE run
# must exist (scripts/stage3_captioners.sh with the same data.features). Outputs land in the config's
# out_dir, named as stage3_captioners.sh names them:
#   best.pt last.pt history.json tb/ preds_test.json preds_test.meta.json metrics_test.json
#   per_image_test.json grounding_test.json attention_test.h5 attention/attention_<image_id>.png
# Usage: scripts/stage3_rl.sh CONFIG [key=value ...]   e.g. configs/demo/demo_topdown_scst.yaml data.features=cap
# The same as `python -m capaware.stage scst CONFIG ...`, the pipeline's command (every step in one process). Reruns
# resume training (a finished run is not retrained) and redo the cheap steps. One thread per process by default (set
# OMP_NUM_THREADS to change it).
set -euo pipefail
exec python -m capaware.stage scst "${@:?usage: $0 CONFIG [key=value ...]}"
