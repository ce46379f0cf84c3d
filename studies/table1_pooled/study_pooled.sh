#!/usr/bin/env bash
# Table 1's pooled study (issue #56), under studies/table1_pooled/configs/declaration_table1_pooled.yaml:
#   bash studies/table1_pooled/study_pooled.sh [RUN] [TRUNK...]      defaults: runs/table1_pooled, the declared trunks
# It prints the power plan's design and time first. Then, for each trunk T not yet kept (resumable trunk by trunk,
# in any order, on any machine: a trunk is done once its record is in the repository):
#   1. scripts/pipeline.sh on RUN/tT/pipeline.yaml (studies/table1_pooled/configs/pipeline_table1_pooled.yaml with
#      seed=T on stage one) up to the features: the trunk's own Img, its Cap, Img-kinds and Img-self rows, five feature
#      sets;
#   2. both captioners, XE then SCST, on every feature set, over the trunk's own captioner seeds
#      (studies/table1_seeds/table1_seeds.sh; each run resumes);
#   3. its record, kept: docs/study_results/table1_pooled/trunk_T.npz (scores, per-image scores, CPU, wall time).
#      Commit it: the next session, maybe on another machine, goes on from the records committed.
# Once every declared trunk is kept: the table (studies.table1_pooled.pooled_table) beside the records.
set -euo pipefail
cd "$(dirname "$0")/../.."
run=${1:-runs/table1_pooled}
shift || true
records=${RECORDS:-docs/study_results/table1_pooled}
declared() { python -c "from studies.table1_pooled.declaration import load_declaration as l; d = l(); print($1)"; }
read -r -a trunks <<<"${*:-$(declared '*d.design.trunks')}"
machine="$(python -c 'from capcore.cpu_isa import cpu_line; print(cpu_line())'), $(nproc) cores"
kept=0
for t in $(declared '*d.design.trunks'); do
  if [[ -f $records/trunk_$t.npz ]]; then kept=$((kept + 1)); fi
done
echo "power plan (declared): $(declared '"{} trunks x {} captioner seeds x {} test images: power {:.0%} at {}, "
  "about {:.1f} CPU hours in all".format(len(d.design.trunks), d.design.seeds_per_trunk, d.design.test_images,
  d.promise.power, d.promise.effect, d.promise.cpu_hours)'); $kept kept so far; this machine: $machine"
for t in "${trunks[@]}"; do
  [[ $t =~ ^[0-9]+$ ]] || { echo "error: trunk '$t' is not a whole number (usage: $0 [RUN] [TRUNK...])" >&2; exit 2; }
  [[ -f $records/trunk_$t.npz ]] && { echo "trunk $t: kept ($records/trunk_$t.npz), skipped"; continue; }
  t0=$SECONDS dir="$run/t$t"
  mkdir -p "$dir"
  python -c "import sys, yaml; c = yaml.safe_load(open(sys.argv[1])); c['run_dir'] = sys.argv[2]
c['stage1'] = [f'{e} seed={sys.argv[3]}' for e in c['stage1']]; print(yaml.safe_dump(c, sort_keys=False), end='')" \
    studies/table1_pooled/configs/pipeline_table1_pooled.yaml "$dir" "$t" >"$dir/pipeline.yaml"  # seed T: the trunk
  bash scripts/pipeline.sh "$dir/pipeline.yaml" --run "$dir" --to features
  read -r -a seeds <<<"$(declared "*d.captioner_seeds_of($t)")"
  bash studies/table1_seeds/table1_seeds.sh "$dir/pipeline.yaml" "$dir" "${seeds[@]}" --results "$dir/results/table1" \
    --machine "$machine"
  python -m studies.table1_pooled.trunk_record "$run" "$t" --machine "$machine" --seconds $((SECONDS - t0)) \
    --records "$records"
  echo "trunk $t: $((SECONDS - t0)) s; commit $records/trunk_$t.npz"
done
for t in $(declared '*d.design.trunks'); do
  [[ -f $records/trunk_$t.npz ]] || { echo "trunk $t not kept yet: the table waits"; exit 0; }
done
python -m studies.table1_pooled.pooled_table --records "$records"
echo "Table 1, pooled: $records/table1_pooled.md"
