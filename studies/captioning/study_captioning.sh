#!/usr/bin/env bash
# The captioning study of issue #35 (`make study-captioning`): Table 1 with the power to see a paper-sized effect.
#   bash studies/captioning/study_captioning.sh [RUN] [SEED...]        defaults: runs/captioning, seeds 0 1 2 3 4
# 1. scripts/pipeline.sh studies/captioning/configs/pipeline_captioning.yaml up to the features: the caption set
#    with 400 val and 1,000 test images, class pretraining (Img) and its attribute control (Attr), the whole-trunk
#    caption track (Cap: log-ratio + dense; Cap2: dense triplet), and the Oracle grid (each scene's ground truth).
# 2. studies/table1_seeds/table1_seeds.sh: both captioners on the five feature sets, XE then SCST, for every seed;
#    Table 1 over seeds with every set's paired difference against Img, its t-test and the smallest difference the
#    seeds could detect -> RUN/results/table1/captioning_seeds.md.
# 3. The probes the captioners' inputs answer: studies.probes.probe (pooled fc) and studies.probes.grid_probe (the
#    attention grid).
# 4. Stage one's caption rows against the label ceiling (studies/caption_labels/caption_label_ceiling.py ->
#    RUN/results/label_ceiling.md).
# Every step resumes; the wall time of each step is printed and written to RUN/results/timing.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-runs/captioning}
shift || true
seeds=("$@")
((${#seeds[@]})) || seeds=(0 1 2 3 4)
config=studies/captioning/configs/pipeline_captioning.yaml
mkdir -p "$run/results"
machine="$(python -c 'from capcore.cpu_isa import cpu_line; print(cpu_line())'), $(nproc) cores"
timing="$run/results/timing.txt"
step() {  # NAME COMMAND...: run it, print and record its wall time
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "$name: $((SECONDS - t0)) s ($machine)" | tee -a "$timing"
}
step "pipeline to features" bash scripts/pipeline.sh "$config" --run "$run" --to features
step "captioners, ${#seeds[@]} seeds" bash studies/table1_seeds/table1_seeds.sh "$config" "$run" "${seeds[@]}" \
  --results "$run/results/table1" --machine "$machine"
refs="$run/data/captions/dataset_coco.json"
feats=() paired=()
for set in img cap cap2 attr oracle; do
  label=$(python -c "from feature_extract.h5io import feature_label; print(feature_label('$run/features/$set.h5'))")
  feats+=("$label=$run/features/$set.h5")
  [[ $label != Img ]] && paired+=("$label=Img")
done
step "probes" bash -c "python -m studies.probes.probe --karpathy $refs --features ${feats[*]} --paired ${paired[*]} \
  --out $run/results/probe \
  && python -m studies.probes.grid_probe --karpathy $refs --features ${feats[*]} --paired ${paired[*]} \
  --out $run/results/grid_probe"
step "label ceiling" bash -c "python -m studies.caption_labels.caption_label_ceiling \
  studies/captioning/configs/captioning_caption.yaml run_dir=$run \
  > $run/results/label_ceiling.md"
echo "Table 1 over seeds: $run/results/table1/captioning_seeds.md; probes: $run/results/{probe,grid_probe}/"
