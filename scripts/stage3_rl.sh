#!/usr/bin/env bash
# Stage three, reinforcement, for one SCST config: self-critical training from the matching XE run's
# best.pt (CIDEr-D reward, best val CIDEr-D) -> beam-2 captions of the test split -> caption metrics
# (pycocoevalcap, plus discriminativeness) -> per-word attention pictures of 4 test images. The XE run
# must exist (scripts/stage3_captioners.sh with the same data.features). Outputs land in the config's
# out_dir, named as stage3_captioners.sh names them:
#   best.pt last.pt history.json tb/ preds_test.json preds_test.meta.json metrics_test.json
#   per_image_test.json grounding_test.json attention_test.h5 attention/attention_<image_id>.png
# Usage: scripts/stage3_rl.sh CONFIG [key=value ...]   e.g. configs/demo_topdown_scst.yaml data.features=cap
# Reruns resume training (a finished run is not retrained) and redo the cheap steps. One thread per
# process by default (set OMP_NUM_THREADS to change it).
set -euo pipefail
config=${1:?usage: $0 CONFIG [key=value ...]}
shift
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# A bad config or override stops here with one line (a command substitution keeps python's exit status).
vals=$(python - "$config" "$@" <<'PY'
import sys
from capcore.errors import CapawareError
from rl.config import load_scst_config
try:
    c = load_scst_config(sys.argv[1], sys.argv[2:])
except CapawareError as err:
    sys.exit(f"error: {err}")
print(c.out_dir, c.data.json, sep="\n")
PY
)
mapfile -t v <<<"$vals"
out=${v[0]} json=${v[1]}
python -m rl.train --config "$config" "$@"
python -m captioners.decode --checkpoint "$out/best.pt" --split test --method beam --beam-size 2 \
  --out "$out/preds_test.json" --attention "$out/attention_test.h5"
python -m eval.captions --preds "$out/preds_test.json" --refs "$json" --split test \
  --out "$out/metrics_test.json" --per-image "$out/per_image_test.json"
python -m eval.grounding "$out" --split test --out "$out/grounding_test.json"
python -m eval.attention_maps --attention "$out/attention_test.h5" --refs "$json" --out "$out/attention" --n 4
