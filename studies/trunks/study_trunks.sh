#!/usr/bin/env bash
# The captioning study over stage-one trunks (issue #46), under studies/trunks/configs/declaration_table1.yaml:
#   bash studies/trunks/study_trunks.sh [RUN] [TRUNK...]     defaults: runs/trunks, the declared trunks
# For each trunk T, in RUN/tT (every step resumes, so trunks can be run one at a time, in any order):
#   1. scripts/pipeline.sh studies/trunks/configs/pipeline_trunks.yaml with seed=T on stage one, up to the features: the
#      trunk's own class pretraining (Img), then Cap, Cap-shuffled and Img-adapted trained alike from it
#      (studies/trunks/configs/trunks_caption.yaml), and their features;
#   2. both captioners, standardised inputs, XE then SCST, over the declared captioner seeds
#      (studies/table1_seeds/table1_seeds.sh) -> RUN/tT/results/table1/s<seed>/captioning.json;
#   3. the standardisation check: the Img and Cap captioners again with their inputs as stage two wrote them
#      (studies/trunks/configs/pipeline_trunks_raw.yaml, in RUN/tT/raw, which links the trunk's data and features)
#      -> RUN/tT/raw/results/table1/s<seed>/captioning.json;
#   4. the feature-scale table -> RUN/tT/results/feature_scale.md.
# Once every declared trunk is done: Table 1 over trunks (studies.trunks.trunk_table -> RUN/results/trunks/), the
# pooled and grid probes over trunks, Cap − Img and Cap − Cap-shuffled (RUN/results/{probe,grid_probe}/), and every
# feature set's scale (RUN/results/feature_scale.md).
# The wall time of each step is printed and appended to RUN/results/timing.txt.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-runs/trunks}
shift || true
declared() { python -c "from studies.declaration import load_declaration as l; print(*l().$1)"; }
read -r -a trunks <<<"${*:-$(declared trunks)}"
read -r -a seeds <<<"$(declared captioner_seeds)"
mkdir -p "$run/results"
machine="$(python -c 'from capcore.cpu_isa import cpu_line; print(cpu_line())'), $(nproc) cores"
step() {  # NAME COMMAND...: run it, print and record its wall time
  local name=$1 t0=$SECONDS
  shift
  "$@"
  echo "$name: $((SECONDS - t0)) s ($machine)" | tee -a "$run/results/timing.txt"
}
for t in "${trunks[@]}"; do
  [[ $t =~ ^[0-9]+$ ]] || { echo "error: trunk '$t' is not a whole number (usage: $0 [RUN] [TRUNK...])" >&2; exit 2; }
  dir="$run/t$t"
  mkdir -p "$dir"
  python - "studies/trunks/configs/pipeline_trunks.yaml" "$dir/pipeline.yaml" "$t" "$dir" <<'EOF'
import sys
from pathlib import Path
import yaml
source, dest, trunk, run_dir = sys.argv[1:]
cfg = yaml.safe_load(Path(source).read_text())
cfg["stage1"] = [f"{entry} seed={trunk}" for entry in cfg["stage1"]]  # the trunk: its pretraining and its rows
cfg["run_dir"] = run_dir
Path(dest).write_text(yaml.safe_dump(cfg, sort_keys=False))
EOF
  step "trunk $t: pipeline to features" bash scripts/pipeline.sh "$dir/pipeline.yaml" --run "$dir" --to features
  step "trunk $t: captioners, seeds ${seeds[*]}" bash studies/table1_seeds/table1_seeds.sh "$dir/pipeline.yaml" "$dir" \
    "${seeds[@]}" --results "$dir/results/table1" --machine "$machine"
  raw="$dir/raw"  # the standardisation check: Img and Cap captioners on the same features, inputs as written
  mkdir -p "$raw"
  for link in data captions features; do ln -sfn "../$link" "$raw/$link"; done
  sed "s|^run_dir: .*|run_dir: $raw|" studies/trunks/configs/pipeline_trunks_raw.yaml >"$raw/pipeline.yaml"
  step "trunk $t: standardisation check, seeds ${seeds[*]}" bash studies/table1_seeds/table1_seeds.sh \
    "$raw/pipeline.yaml" "$raw" "${seeds[@]}" --results "$raw/results/table1" --machine "$machine"
  python -m studies.trunks.feature_scale Img="$dir/features/img.h5" Cap="$dir/features/cap.h5" \
    Cap-shuffled="$dir/features/cap_shuffled.h5" Img-adapted="$dir/features/img_adapted.h5" \
    --out "$dir/results/feature_scale.md" >/dev/null
done
read -r -a all <<<"$(declared trunks)"
for t in "${all[@]}"; do  # the tables over trunks need every declared trunk
  [[ -f $run/t$t/results/table1/s${seeds[-1]}/captioning.json ]] \
    || { echo "trunk $t not finished: tables over trunks wait"; exit 0; }
done
step "Table 1 over trunks" python -m studies.trunks.trunk_table "$run" --out "$run/results/trunks"
feats=() scale=()  # NAME=FILE per trunk and feature set: the probes pair them by trunk, the scale table names it
for t in "${all[@]}"; do
  for pair in Img=img Cap=cap Cap-shuffled=cap_shuffled Img-adapted=img_adapted; do
    feats+=("${pair%%=*}=$run/t$t/features/${pair#*=}.h5")
    scale+=("${pair%%=*} (trunk $t)=$run/t$t/features/${pair#*=}.h5")
  done
done
refs="$run/t${all[0]}/data/captions/dataset_coco.json"
step "probes over trunks" bash -c "python -m studies.probes.probe --karpathy $refs --features ${feats[*]} \
  --paired Cap=Img Cap=Cap-shuffled Img-adapted=Img --out $run/results/probe \
  && python -m studies.probes.grid_probe --karpathy $refs --features ${feats[*]} \
  --paired Cap=Img Cap=Cap-shuffled Img-adapted=Img --out $run/results/grid_probe"
python -m studies.trunks.feature_scale "${scale[@]}" --out "$run/results/feature_scale.md" >/dev/null
echo "Table 1 over trunks: $run/results/trunks/table1_trunks.md; probes: $run/results/{probe,grid_probe}/;" \
  "feature scale: $run/results/feature_scale.md"
