#!/usr/bin/env bash
# Table 1 over captioner training seeds, on the features of a finished pipeline run:
#   scripts/table1_seeds.sh PIPELINE_CONFIG RUN SEED... [--machine "text"]
#   e.g. scripts/table1_seeds.sh configs/demo/pipeline_demo.yaml runs/demo 0 1 2 --machine "2-core Xeon, CPU"
# For every seed, every XE config x feature set of the pipeline config is trained (then SCST from it) and
# scored exactly as the pipeline's captioners/rl stages do; seed 0 is the pipeline's own run (reused
# when it is finished), other seeds write under RUN/seeds/s<seed>/. Stage one and the features stay
# fixed: the seeds vary the captioners' initialisation, batch order, dropout and sampling. Then
# eval.reporting.results_table per seed and eval.reporting.results_seeds over all seeds write
# RUN/results/captioning_seeds/captioning_seeds.{md,json} (mean ± sd, paired Cap - Img differences).
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: $0 PIPELINE_CONFIG RUN SEED... [--machine TEXT]"
config=${1:?$usage} run=${2:?$usage}
shift 2
seeds=() machine=""
while (($#)); do
  case $1 in
    --machine) machine=${2:?$usage}; shift 2 ;;
    *) seeds+=("$1"); shift ;;
  esac
done
((${#seeds[@]})) || { echo "error: no seeds given; $usage" >&2; exit 2; }
plan() { python scripts/pipeline_plan.py "$config" --run "$run" "$@"; }
mapfile -t xe < <(plan commands captioners)
mapfile -t rl < <(plan commands rl)
tables=()
for seed in "${seeds[@]}"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "error: seed '$seed' is not a whole number; $usage" >&2; exit 2; }
  results="$run/results/captioning_seeds/s$seed"
  if ((seed == 0)); then  # the pipeline's own runs (skipped when finished: the scripts resume)
    extra=() dirs_root="$run/captioners"
  else
    dirs_root="$run/seeds/s$seed/captioners"
    extra=("seed=$seed")
  fi
  dirs=()
  for cmd in "${xe[@]}" "${rl[@]}"; do
    # "bash scripts/stage3_X.sh CONFIG run_dir=RUN data.features=F ...": name the seed's own folders
    feats=$(grep -o 'data\.features=[^ ]*' <<<"$cmd" | tail -n 1); feats=${feats#data.features=}
    stage_config=$(awk '{print $3}' <<<"$cmd")
    model=$(basename "$stage_config" .yaml); model=${model#demo_}; model=${model#coco_}
    xe_model=${model%_scst}
    out="$dirs_root/${feats}_${model}"
    over=("${extra[@]}")
    if ((seed != 0)); then
      over+=("out_dir=$out")
      [[ $model == *_scst ]] && over+=("init=$dirs_root/${feats}_${xe_model}/best.pt")
    fi
    echo "[seed $seed] $stage_config data.features=$feats -> $out"
    mkdir -p "$dirs_root"
    dirs+=("$out")
    if [[ -f $out/grounding_test.json && $out/grounding_test.json -nt $out/best.pt ]]; then
      continue  # trained and scored already (the stage script's last output is newer than its weights)
    fi
    suffix=""
    ((${#over[@]})) && suffix=$(printf ' %q' "${over[@]}")  # later overrides win
    bash -c "$cmd$suffix" >"$out.log" 2>&1 || { echo "error: seed $seed failed; see $out.log" >&2; exit 1; }
  done
  python -m eval.reporting.results_table "${dirs[@]}" --out "$results" >/dev/null
  tables+=("$results/captioning.json")
done
python -m eval.reporting.results_seeds "${tables[@]}" --out "$run/results/captioning_seeds" --machine "${machine:-$(uname -m), $(nproc) cores}"
