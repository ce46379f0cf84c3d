#!/usr/bin/env bash
# Table 1 over captioner training seeds, on the features of a finished pipeline run:
#   studies/table1_seeds/table1_seeds.sh PIPELINE_CONFIG RUN SEED... [--machine "text"] [--results DIR] [--jobs N]
#   e.g. studies/table1_seeds/table1_seeds.sh configs/demo/pipeline_demo.yaml runs/demo 0 1 2 \
#          --machine "2-core Xeon, CPU"
# For every seed, every XE config x feature set of the pipeline config is trained (then SCST from it) and
# scored exactly as the pipeline's captioners/rl stages do; seed 0 is the pipeline's own run (reused
# when it is finished), other seeds write under RUN/seeds/s<seed>/. Stage one and the features stay
# fixed: the seeds vary the captioners' initialisation, batch order, dropout and sampling. Then
# eval.reporting.results_table per seed and studies.table1_seeds.results_seeds over all seeds write
# RUN/results/captioning_seeds/captioning_seeds.{md,json} (or DIR/...: mean ± sd, every feature set's paired
# difference against Img with its t-test and the smallest difference the seeds could detect).
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: $0 PIPELINE_CONFIG RUN SEED... [--machine TEXT] [--results DIR] [--jobs N]"
config=${1:?$usage} run=${2:?$usage}
shift 2
seeds=() machine="" results_root="" jobs=""
while (($#)); do
  case $1 in
    --machine) machine=${2:?$usage}; shift 2 ;;
    --results) results_root=${2:?$usage}; shift 2 ;;
    --jobs) jobs=${2:?$usage}; shift 2 ;;
    *) seeds+=("$1"); shift ;;
  esac
done
((${#seeds[@]})) || { echo "error: no seeds given; $usage" >&2; exit 2; }
results_root=${results_root:-$run/results/captioning_seeds}
plan() { python -m capaware.pipeline_plan "$config" --run "$run" "$@"; }
mapfile -t xe < <(plan commands captioners)
mapfile -t rl < <(plan commands rl)
jobs=${jobs:-$(plan jobs captioners)}
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}  # the captioners are tiny: one thread each, $jobs at a time

config_of() { grep -oE '[^ ]+\.ya?ml' <<<"$1" | head -n 1; }  # a planned command's stage config

target() {  # CMD SEED -> "OUT OVERRIDES...": the run folder a command writes for a seed, and its overrides
  local cmd=$1 seed=$2 feats stage_config model xe_model root
  feats=$(grep -o 'data\.features=[^ ]*' <<<"$cmd" | tail -n 1); feats=${feats#data.features=}
  stage_config=$(config_of "$cmd")
  model=$(basename "$stage_config" .yaml); model=${model#demo_}; model=${model#coco_}
  xe_model=${model%_scst}
  if ((seed == 0)); then root="$run/captioners"; else root="$run/seeds/s$seed/captioners"; fi
  printf '%s' "$root/${feats}_${model}"
  ((seed == 0)) && return 0  # the pipeline's own runs (skipped when finished: the scripts resume)
  printf ' %q' "seed=$seed" "out_dir=$root/${feats}_${model}"
  [[ $model == *_scst ]] && printf ' %q' "init=$root/${feats}_${xe_model}/best.pt"
  return 0
}

run_one() {  # CMD SEED: train and score one run unless it is done (its last output newer than its weights)
  local spec out over
  spec=$(target "$1" "$2"); out=${spec%% *}; over=${spec#"$out"}
  mkdir -p "$(dirname "$out")"
  [[ -f $out/grounding_test.json && $out/grounding_test.json -nt $out/best.pt ]] && return 0
  echo "[seed $2] ${1#python -m capaware.stage } -> $out"
  bash -c "$1$over" >"$out.log" 2>&1 || { echo "error: seed $2 failed; see $out.log" >&2; return 1; }
}

chain() {  # SEED XE_CMD: an XE run, then every SCST run of the same model and features that starts from it
  local seed=$1 xe_cmd=$2 feats cfg rl_cmd
  run_one "$xe_cmd" "$seed" || return 1
  feats=$(grep -o 'data\.features=[^ ]*' <<<"$xe_cmd" | tail -n 1)
  cfg=$(basename "$(config_of "$xe_cmd")" .yaml)
  for rl_cmd in "${rl[@]}"; do
    [[ $(basename "$(config_of "$rl_cmd")" .yaml) == "${cfg}_scst" ]] || continue
    [[ " $rl_cmd " == *" $feats "* ]] || continue  # the whole token: data.features=cap is not data.features=cap2
    run_one "$rl_cmd" "$seed" || return 1
  done
}

for seed in "${seeds[@]}"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "error: seed '$seed' is not a whole number; $usage" >&2; exit 2; }
done
failed=0
for seed in "${seeds[@]}"; do  # every (seed, XE run) chain, $jobs at a time
  for cmd in "${xe[@]}"; do
    while (($(jobs -rp | wc -l) >= jobs)); do wait -n || failed=1; done
    chain "$seed" "$cmd" &
  done
done
while (($(jobs -rp | wc -l))); do wait -n || failed=1; done
((failed == 0)) || { echo "error: some runs failed (their logs are named above)" >&2; exit 1; }
tables=()
for seed in "${seeds[@]}"; do
  dirs=()
  for cmd in "${xe[@]}" "${rl[@]}"; do spec=$(target "$cmd" "$seed"); dirs+=("${spec%% *}"); done
  python -m eval.reporting.results_table "${dirs[@]}" --out "$results_root/s$seed" >/dev/null
  tables+=("$results_root/s$seed/captioning.json")
done
python -m studies.table1_seeds.results_seeds "${tables[@]}" --out "$results_root" \
  --machine "${machine:-$(uname -m), $(nproc) cores}"
