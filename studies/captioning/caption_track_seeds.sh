#!/usr/bin/env bash
# The captioning study's stage one over training seeds (issue #35): what the whole-trunk caption track
# (studies/captioning/configs/captioning_caption.yaml: Cap, log-ratio + dense; Cap2, dense triplet) writes into the
# trunk, seed by seed, and how much of the label ceiling its retrieval reaches.
#   bash studies/captioning/caption_track_seeds.sh RUN SEED...
#   e.g. bash studies/captioning/caption_track_seeds.sh runs/captioning 0 1 2
# Needs only the study's data stage (run here when missing). Seed 0 reuses a finished `make study-captioning`
# (RUN/caption and RUN/features) when there is one; every other seed runs under RUN/track_seeds/s<seed>/: class
# pretraining and both rows with that seed, then stage two's Img, Cap and Cap2 features; two seeds at a time, one
# core each. Then, over the seeds:
#   RUN/results/track_seeds/probe/       studies.probes.probe (pooled) with Cap − Img and Cap2 − Img paired by seed
#   RUN/results/track_seeds/grid_probe/  studies.probes.grid_probe (the attention grid), paired the same way
#   RUN/results/track_seeds/ceiling_s<s>.md  retrieval against the label ceiling
#                                            (studies/caption_labels/caption_label_ceiling.py)
#   RUN/results/track_seeds/ceiling.md   each row's share of the Img-to-ceiling gap over the seeds
#                                        (studies/caption_labels/ceiling_seeds.py)
#   RUN/results/track_seeds/timing.txt   the wall time of every seed and of the probes
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: $0 RUN SEED..."
run=${1:?$usage}
shift
(($#)) || { echo "error: no seeds given; $usage" >&2; exit 2; }
for seed in "$@"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "error: seed '$seed' is not a whole number; $usage" >&2; exit 2; }
done
config=studies/captioning/configs/captioning_caption.yaml
results="$run/results/track_seeds"
mkdir -p "$results"
machine="$(python -c 'from capcore.cpu_isa import cpu_line; print(cpu_line())'), $(nproc) cores"
timing="$results/timing.txt"
export OMP_NUM_THREADS=1
[[ -f $run/data/captions/dataset_coco.json ]] \
  || bash scripts/pipeline.sh studies/captioning/configs/pipeline_captioning.yaml --run "$run" --to data

study_done() { [[ -f $run/features/cap.h5 && -f $run/features/cap2.h5 ]]; }
folder() { if (($1 == 0)) && study_done; then echo "$run/caption"; else echo "$run/track_seeds/s$1"; fi; }
features() {
  if (($1 == 0)) && study_done; then echo "$run/features/$2.h5"; else echo "$run/track_seeds/s$1/$2.h5"; fi
}

extract() {  # seed set checkpoint
  python -m feature_extract --config configs/demo/demo_features_img.yaml run_dir="$run" out="$(features "$1" "$2")" \
    label="$4" backbone.checkpoint="$(folder "$1")/$3"
}

replicate() {  # seed: stage one and stage two with that seed, timed
  local out t0=$SECONDS
  out=$(folder "$1")
  mkdir -p "$out"
  # the label graphs do not depend on the seed (load_or_build_graph checks their attributes before reuse)
  [[ -f $run/caption/labels.h5 && ! -f $out/labels.h5 ]] \
    && cp "$run/caption/labels.h5" "$run/caption/eval_labels.h5" "$out/"
  python -m embedder.rows --config "$config" run_dir="$run" seed="$1" out_dir="$out"
  extract "$1" img class_pretrained/model.pt Img
  extract "$1" cap methods/l_log_ratio_m_dense/model.pt Cap
  extract "$1" cap2 methods/l_triplet_m_dense/model.pt Cap2
  echo "seed $1: $((SECONDS - t0)) s ($machine, one thread, beside another seed)" >>"$timing"
}

for seed in "$@"; do
  ((seed == 0)) && study_done && continue
  while (($(jobs -rp | wc -l) >= 2)); do wait -n; done
  replicate "$seed" >"$run/track_seeds_s$seed.log" 2>&1 &
done
while (($(jobs -rp | wc -l))); do
  wait -n || { echo "error: a replicate failed; see $run/track_seeds_s*.log" >&2; exit 1; }
done
t0=$SECONDS
feats=()
for seed in "$@"; do
  feats+=("Img=$(features "$seed" img)" "Cap=$(features "$seed" cap)" "Cap2=$(features "$seed" cap2)")
done
refs="$run/data/captions/dataset_coco.json"
python -m studies.probes.probe --karpathy "$refs" --features "${feats[@]}" --paired Cap=Img Cap2=Img \
  --out "$results/probe"
python -m studies.probes.grid_probe --karpathy "$refs" --features "${feats[@]}" --paired Cap=Img Cap2=Img \
  --out "$results/grid_probe"
for seed in "$@"; do
  python -m studies.caption_labels.caption_label_ceiling "$config" run_dir="$run" seed="$seed" \
    out_dir="$(folder "$seed")" > "$results/ceiling_s$seed.md"
done
shares=()
for seed in "$@"; do shares+=("$(folder "$seed")/ceiling_shares.json"); done
python -m studies.caption_labels.ceiling_seeds "${shares[@]}" > "$results/ceiling.md"
echo "probes and ceilings: $((SECONDS - t0)) s ($machine)" >>"$timing"
echo "caption track over seeds $*: results in $results/ (wall times: $timing)"
