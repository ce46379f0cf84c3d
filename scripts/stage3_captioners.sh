#!/usr/bin/env bash
# Stage three for one captioner config: prepro -> XE training (best val CIDEr-D) -> beam-2 captions of
# the test split -> caption metrics (pycocoevalcap; SPICE reported unavailable without its CoreNLP
# models) -> per-word attention pictures of 4 test images. Outputs land in the config's out_dir:
#   best.pt last.pt history.json tb/ preds_test.json preds_test.meta.json metrics_test.json
#   per_image_test.json grounding_test.json attention_test.h5 attention/attention_<image_id>.png
# Usage: scripts/stage3_captioners.sh CONFIG [key=value ...]   e.g. configs/demo_topdown.yaml data.features=cap
# data.features=img|cap picks features_dir/<name>.h5 and, through the demo/coco configs' out_dir, its own
# run folder (runs/demo/captioners/<features>_<model>). Table 1 from the run folders:
#   python -m eval.results_table runs/demo/captioners/{img,cap}_{att2all2,topdown} --out results/captioning
# Reruns resume training (a finished run is not retrained) and redo the cheap steps. The LSTMs are tiny
# on the demo, so one thread per process is the default (set OMP_NUM_THREADS to change it).
set -euo pipefail
config=${1:?usage: $0 CONFIG [key=value ...]}
shift
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
# A bad config or override stops here with one line (a command substitution keeps python's exit status).
vals=$(python - "$config" "$@" <<'PY'
import sys
from capcore.errors import CapawareError
from captioners.config import load_captioner_config
try:
    c = load_captioner_config(sys.argv[1], sys.argv[2:])
except CapawareError as err:
    sys.exit(f"error: {err}")
print(c.out_dir, c.data.json, c.data.prepro_dir, c.data.word_count_threshold, c.data.max_length, sep="\n")
PY
)
mapfile -t v <<<"$vals"
out=${v[0]} json=${v[1]} prepro=${v[2]}
if [[ ! -f "$prepro/labels.h5" || ! -f "$prepro/vocab.json" ]]; then
  python -m captioners.prepro --json "$json" --out "$prepro" --threshold "${v[3]}" --max-length "${v[4]}"
fi
python -m captioners.train --config "$config" "$@"
python -m captioners.decode --checkpoint "$out/best.pt" --split test --method beam --beam-size 2 \
  --out "$out/preds_test.json" --attention "$out/attention_test.h5"
python -m eval.captions --preds "$out/preds_test.json" --refs "$json" --split test \
  --out "$out/metrics_test.json" --per-image "$out/per_image_test.json"
python -m eval.grounding "$out" --split test --out "$out/grounding_test.json"
python -m eval.attention_maps --attention "$out/attention_test.h5" --refs "$json" --out "$out/attention" --n 4
