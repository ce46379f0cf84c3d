#!/usr/bin/env bash
# The staged pipeline: data -> stage1 (retrieval studies) -> features (Img, Cap) -> captioners (XE)
# -> rl (SCST) -> scores (Table 1) -> report (static HTML).
#
# Usage: scripts/pipeline.sh CONFIG [--from STAGE] [--to STAGE] [--force] [--run DIR]
#   CONFIG   a pipeline config (configs/demo/pipeline_demo.yaml, configs/paper/pipeline_paper.yaml)
#   --from/--to  run only the stages in this range (names above)
#   --force  delete the outputs of the stages in range and run them again
#   --run    the run folder (default: run_dir of CONFIG); every output of the run lives under it
#
# A stage that finished with the same inputs (its marker under RUN/.pipeline holds a fingerprint of its
# commands, configs and the stages before it) is skipped; a killed run resumes, since each stage's
# commands resume their own checkpoints. Each stage logs to RUN/logs/STAGE.log; a failed stage stops
# the pipeline with one line naming that log.
set -euo pipefail
cd "$(dirname "$0")/.."
usage="usage: $0 CONFIG [--from STAGE] [--to STAGE] [--force] [--run DIR]"
config=${1:?$usage}
shift
from="" to="" force=0 run_args=()
while (($#)); do
  case $1 in
    --from) from=${2:?$usage}; shift 2 ;;
    --to) to=${2:?$usage}; shift 2 ;;
    --force) force=1; shift ;;
    --run) run_args=(--run "${2:?$usage}"); shift 2 ;;
    *) echo "error: unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
done

plan() { python scripts/pipeline_plan.py "$config" "${run_args[@]}" "$@"; }
plan validate >/dev/null  # every stage config, checked before the first stage runs (one error line if not)
mapfile -t stages < <(plan stages)
run=$(plan run-dir)
from=${from:-${stages[0]}} to=${to:-${stages[-1]}}
index() { local i; for i in "${!stages[@]}"; do [[ ${stages[$i]} == "$1" ]] && { echo "$i"; return; }; done
  echo "error: unknown stage '$1'; stages: ${stages[*]}" >&2; exit 2; }
lo=$(index "$from") hi=$(index "$to")
# what the stages still to run need (Java, weights, data folders, disk): checked in seconds, not hours in
force_arg=()
((force)) && force_arg=(--force)
plan preflight "$from" "$to" "${force_arg[@]}"
mkdir -p "$run/logs" "$run/.pipeline"
start=$(date +%s)

for ((i = lo; i <= hi; i++)); do
  stage=${stages[$i]} log="$run/logs/${stages[$i]}.log" marker="$run/.pipeline/${stages[$i]}.done"
  fingerprint=$(plan fingerprint "$stage")
  if ((force)); then
    rm -f "$marker"
    while read -r path; do [[ -n $path ]] && rm -rf -- "$path"; done < <(plan outputs "$stage")
  fi
  if [[ -f $marker && $(cat "$marker") == "$fingerprint" ]]; then
    echo "[$stage] complete, skipped"
    continue
  fi
  rm -f "$marker"
  commands=()
  mapfile -t commands < <(plan commands "$stage")
  echo "[$stage] running ${#commands[@]} command(s); log: $log"
  t0=$(date +%s)
  {
    echo "# $(date -u +%FT%TZ) stage $stage, fingerprint $fingerprint"
  } >>"$log"
  max_jobs=$(plan jobs "$stage")
  # up to $max_jobs commands at once (independent trainings), each into its own log part; with several
  # at once each gets its share of the cores (unless OMP_NUM_THREADS is set), not all of them
  threads=$(( $(nproc) / max_jobs )); ((threads >= 1)) || threads=1
  share=()
  ((max_jobs == 1)) || share=(env "OMP_NUM_THREADS=${OMP_NUM_THREADS:-$threads}")
  pids=() parts=() failed=""
  for k in "${!commands[@]}"; do
    cmd=${commands[$k]}
    [[ -n $cmd ]] || continue
    part="$log.part$k"
    echo "\$ $cmd" >"$part"
    "${share[@]}" bash -c "$cmd" >>"$part" 2>&1 &
    pids+=($!) parts+=("$part")
    while (($(jobs -rp | wc -l) >= max_jobs)); do wait -n || { failed=yes; break; }; done
    [[ -z $failed ]] || break  # a command failed: start no more
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || failed=yes
  done
  for part in "${parts[@]}"; do cat "$part" >>"$log"; rm -f "$part"; done
  if [[ -n $failed ]]; then
    # (|| true: under pipefail a log without such a line, e.g. a killed command's, must still get its line)
    last=$(tr '\r' '\n' <"$log" | grep -E '^(error|[A-Za-z.]*(Error|Exception))' | tail -n 1 | cut -c1-300 || true)
    [[ -n $last ]] || last=$(tr '\r' '\n' <"$log" | grep -v '^\s*$' | tail -n 1 | cut -c1-300 || true)
    echo "error: stage $stage failed: ${last}  (full log: $log)" >&2
    exit 1
  fi
  echo "$fingerprint" >"$marker.tmp" && mv "$marker.tmp" "$marker"
  echo "[$stage] done in $(($(date +%s) - t0)) s"
done

echo
while read -r table; do
  [[ -f $table ]] && { cat "$table"; echo; }
done < <(plan tables)
[[ -f $run/report/index.html ]] && echo "report: $run/report/index.html"
echo "pipeline finished in $(($(date +%s) - start)) s; every output under $run/"
