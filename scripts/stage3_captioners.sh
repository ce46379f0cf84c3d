#!/usr/bin/env bash
# Stage three for one captioner config: prepro -> XE training (best val CIDEr-D) -> beam-2 captions of
# the test split -> caption metrics (pycocoevalcap; SPICE reported unavailable without its CoreNLP
# models) -> per-word attention pictures of 4 test images. Outputs land in the config's out_dir:
#   best.pt last.pt history.json tb/ preds_test.json preds_test.meta.json metrics_test.json
#   per_image_test.json grounding_test.json attention_test.h5 attention/attention_<image_id>.png
# Usage: scripts/stage3_captioners.sh CONFIG [key=value ...]   e.g. configs/demo/demo_topdown.yaml data.features=cap
# data.features=img|cap picks features_dir/<name>.h5 and, through the demo/coco configs' out_dir, its own
# run folder (runs/demo/captioners/<features>_<model>). Table 1 from the run folders:
#   python -m eval.reporting.results_table runs/demo/captioners/{img,cap}_{att2all2,topdown} --out results/captioning
# The same as `python -m capaware.stage xe CONFIG ...`, the pipeline's command (every step in one process). Reruns
# resume training (a finished run is not retrained) and redo the cheap steps. The LSTMs are tiny on the demo, so one
# thread per process is the default (set OMP_NUM_THREADS to change it).
set -euo pipefail
exec python -m capaware.stage xe "${@:?usage: $0 CONFIG [key=value ...]}"
