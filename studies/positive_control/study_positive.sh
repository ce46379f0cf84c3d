#!/usr/bin/env bash
# The positive control and its negative (issues #35, #46), by the rules docs/declaration.md fixed before the run:
#   bash studies/positive_control/study_positive.sh [RUN] [key=value ...]
#   default RUN: runs/positive; overrides go to every run
# From the colour-blind stand-in, the caption track with per-stage rates
# (studies/positive_control/configs/positive_control_caption.yaml), each run probed every $EVERY steps (default 150) for
# 4 epochs (1,200 steps) by studies/probes/probe_curve.py:
#   1. the recipe: seed 0, real labels, layer4 at 10x (#35's recipe) and at 30x (the lever #35 left untried); the
#      higher best val colour is kept;
#   2. the kept recipe on the other declared seeds, and on shuffled labels over every declared seed
#      (studies/positive_control/configs/positive_control_caption_shuffled.yaml);
#   3. the budget chosen on val and the verdict on test -> RUN/results/positive_control.{md,json}.
# Every run resumes as a whole: a finished run (RUN/<recipe>_<labels>/s<seed>/finished) is skipped, an unfinished one
# is started again. Two runs at a time, one thread each; each run's output is in RUN/<recipe>_<labels>/s<seed>.log.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-runs/positive}
shift || true
extra=("$@")
every=${EVERY:-150}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}
real=studies/positive_control/configs/positive_control_caption.yaml
shuffled=studies/positive_control/configs/positive_control_caption_shuffled.yaml
declare -A recipe_override=([layer4_10x]="train.layer_lr.layer4=10" [layer4_30x]="train.layer_lr.layer4=30")
read -r -a seeds <<<"$(python -c 'from studies.declaration import load_declaration as l
print(*l().positive_control.seeds)')"

curve() {  # RECIPE LABELS SEED: one probed run, unless it finished
  local recipe=$1 labels=$2 seed=$3 config=$real out
  [[ $labels == shuffled ]] && config=$shuffled
  out="$run/${recipe}_$labels/s$seed"
  [[ -f $out/finished ]] && return 0
  rm -rf "$out"
  mkdir -p "$out"
  echo "[positive control] $recipe, $labels labels, seed $seed -> $out"
  python -m studies.probes.probe_curve "$config" run_dir="$run" out_dir="$out" seed="$seed" train.epochs=4 \
    "${recipe_override[$recipe]}" "${extra[@]}" --every "$every" >"$out.log" 2>&1 \
    || { echo "error: $recipe, $labels labels, seed $seed failed; see $out.log" >&2; return 1; }
  touch "$out/finished"
}

two_at_a_time() {  # "RECIPE LABELS SEED"...: every run, two at once
  local failed=0 spec
  for spec in "$@"; do
    while (($(jobs -rp | wc -l) >= 2)); do wait -n || failed=1; done
    # shellcheck disable=SC2086
    curve $spec &
  done
  while (($(jobs -rp | wc -l))); do wait -n || failed=1; done
  return $failed
}

python -m capaware.stage data "$real" run_dir="$run" "${extra[@]}"
two_at_a_time "layer4_10x real ${seeds[0]}" "layer4_30x real ${seeds[0]}"
kept=$(python -m studies.positive_control.positive_control_check recipe \
  "layer4_10x=$run/layer4_10x_real/s${seeds[0]}/probe_curve.json" \
  "layer4_30x=$run/layer4_30x_real/s${seeds[0]}/probe_curve.json")
echo "[positive control] recipe kept on val: $kept"
specs=()
for s in "${seeds[@]:1}"; do specs+=("$kept real $s"); done
for s in "${seeds[@]}"; do specs+=("$kept shuffled $s"); done
two_at_a_time "${specs[@]}"
real_curves=() shuffled_curves=()
for s in "${seeds[@]}"; do
  real_curves+=("$run/${kept}_real/s$s/probe_curve.json")
  shuffled_curves+=("$run/${kept}_shuffled/s$s/probe_curve.json")
done
python -m studies.positive_control.positive_control_check verdict --real "${real_curves[@]}" \
  --shuffled "${shuffled_curves[@]}" --out "$run/results"
