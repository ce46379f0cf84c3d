#!/usr/bin/env bash
# The captioning study's stage one over training seeds (issue #35): what the whole-trunk caption track (log-ratio +
# dense, configs/study/captioning_caption.yaml) writes into the trunk, seed by seed. Needs a finished
# `make study-captioning` run (its data, and seed 0's trunks, which are reused):
#   bash scripts/caption_track_seeds.sh RUN SEED...        e.g. bash scripts/caption_track_seeds.sh runs/captioning 0 1 2
# Per seed s > 0, under RUN/track_seeds/s<s>/: class pretraining and the log-ratio row with that seed, then stage
# two's Img and Cap features; two seeds at a time, one core each. Then, over the seeds:
#   RUN/results/track_seeds/probe/      eval.probe (pooled) with Cap − Img paired by seed
#   RUN/results/track_seeds/grid_probe/ eval.grid_probe (the attention grid) with Cap − Img paired by seed
#   RUN/results/track_seeds/ceiling_s<s>.md  retrieval against the label ceiling (scripts/caption_label_ceiling.py)
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: $0 RUN SEED..."
run=${1:?$usage}
shift
(($#)) || { echo "error: no seeds given; $usage" >&2; exit 2; }
for seed in "$@"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "error: seed '$seed' is not a whole number; $usage" >&2; exit 2; }
done
[[ -f $run/features/cap.h5 ]] || { echo "error: $run/features/cap.h5 is missing; run make study-captioning first" >&2; exit 2; }
config=configs/study/captioning_caption.yaml
row='methods=[{row: "L(Log-ratio)+M(Dense)", lr: 0.0001}]'
results="$run/results/track_seeds"
mkdir -p "$results"
export OMP_NUM_THREADS=1

folder() { if (($1 == 0)); then echo "$run/caption"; else echo "$run/track_seeds/s$1"; fi; }
features() { if (($1 == 0)); then echo "$run/features/$2.h5"; else echo "$run/track_seeds/s$1/$2.h5"; fi; }

replicate() {  # seed (> 0)
  local out
  out=$(folder "$1")
  mkdir -p "$out"
  [[ -f $run/caption/labels.h5 && ! -f $out/labels.h5 ]] && cp "$run/caption/labels.h5" "$run/caption/eval_labels.h5" "$out/"
  python -m embedder.study --config "$config" run_dir="$run" seed="$1" out_dir="$out" "$row"
  python -m feature_extract --config configs/demo/demo_features_img.yaml run_dir="$run" out="$(features "$1" img)" \
    backbone.checkpoint="$out/class_pretrained/model.pt"
  python -m feature_extract --config configs/demo/demo_features_img.yaml run_dir="$run" out="$(features "$1" cap)" \
    backbone.checkpoint="$out/methods/l_log_ratio_m_dense/model.pt"
}

t0=$SECONDS
for seed in "$@"; do
  ((seed == 0)) && continue
  while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
  replicate "$seed" >"$run/track_seeds_s$seed.log" 2>&1 &
done
while (($(jobs -rp | wc -l))); do wait -n || { echo "error: a replicate failed; see $run/track_seeds_s*.log" >&2; exit 1; }; done
feats=()
for seed in "$@"; do feats+=("Img=$(features "$seed" img)" "Cap=$(features "$seed" cap)"); done
refs="$run/data/captions/dataset_coco.json"
python -m eval.probe --karpathy "$refs" --features "${feats[@]}" --paired Cap=Img --out "$results/probe"
python -m eval.grid_probe --karpathy "$refs" --features "${feats[@]}" --paired Cap=Img --out "$results/grid_probe"
for seed in "$@"; do
  python scripts/caption_label_ceiling.py "$config" run_dir="$run" seed="$seed" out_dir="$(folder "$seed")" "$row" \
    > "$results/ceiling_s$seed.md"
done
echo "caption track over seeds $*: $((SECONDS - t0)) s; results in $results/"
