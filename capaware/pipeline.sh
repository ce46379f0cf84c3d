#!/usr/bin/env bash
# The staged pipeline: data -> stage1 (retrieval studies) -> features (Img, Cap) -> captioners (XE)
# -> rl (SCST) -> scores (Table 1) -> report (static HTML).
#
# Usage: capaware run CONFIG [--from STAGE] [--to STAGE] [--force] [--run DIR]
#                             [--nproc N [--nnodes M --node-rank R --rdzv-endpoint HOST:PORT]]
#   CONFIG   a pipeline config (configs/demo/pipeline_demo.yaml, configs/paper/pipeline_paper.yaml)
#   --from/--to  run only the stages in this range (names above)
#   --force  delete the outputs of the stages in range and run them again
#   --run    the run folder (default: run_dir of CONFIG); every output of the run lives under it
#   --nproc  processes (GPUs) per machine for the stages that train in parallel (stage1, captioners, rl):
#            each of their commands runs under torchrun; the other stages run as before. A stage's
#            marker does not depend on N, so a run started with one process count resumes with another.
#   --nnodes/--node-rank/--rdzv-endpoint  several machines sharing one run folder (docs/devices.md):
#            each runs this same command with its own --node-rank; node 0 runs every stage, the others
#            join each parallel stage's rendezvous and wait for node 0's marker of every other stage.
#
# A stage that finished with the same inputs (its marker under RUN/.pipeline holds a fingerprint of its
# commands, configs and the stages before it) is skipped; a killed run resumes, since each stage's
# commands resume their own checkpoints. Each stage logs to RUN/logs/STAGE.log; a failed stage stops
# the pipeline with one line naming that log.
#
# capaware.cli runs this file (package data, so that a non-editable install runs it) in the project folder,
# with the interpreter capaware runs in first on PATH: `python` below and in every planned command is it.
set -euo pipefail
usage="usage: capaware run CONFIG [--from STAGE] [--to STAGE] [--force] [--run DIR] \
[--nproc N [--nnodes M --node-rank R --rdzv-endpoint HOST:PORT]]"
config=${1:?$usage}
shift
from="" to="" force=0 run_args=() nproc=1 nnodes=1 node_rank=0 endpoint=""
while (($#)); do
  case $1 in
    --from) from=${2:?$usage}; shift 2 ;;
    --to) to=${2:?$usage}; shift 2 ;;
    --force) force=1; shift ;;
    --run) run_args=(--run "${2:?$usage}"); shift 2 ;;
    --nproc) nproc=${2:?$usage}; shift 2 ;;
    --nnodes) nnodes=${2:?$usage}; shift 2 ;;
    --node-rank) node_rank=${2:?$usage}; shift 2 ;;
    --rdzv-endpoint) endpoint=${2:?$usage}; shift 2 ;;
    *) echo "error: unknown argument '$1'; $usage" >&2; exit 2 ;;
  esac
done
for n in "$nproc" "$nnodes" "$node_rank"; do
  [[ $n =~ ^[0-9]+$ ]] || { echo "error: --nproc, --nnodes and --node-rank take whole numbers, not '$n'" >&2; exit 2; }
done
if ((nnodes > 1)) && [[ -z $endpoint ]]; then
  echo "error: --nnodes $nnodes needs --rdzv-endpoint HOST:PORT (node 0's address, the same on every machine)" >&2
  exit 2
fi
# the parallel stages' commands (python -m capaware.stage stage1|xe|scst) start again under $CAPAWARE_LAUNCH:
# torchrun when asked for more than one process
launch=""
if ((nproc * nnodes > 1)); then
  launch="python -m capcore.launch --nproc_per_node $nproc"  # torchrun, each rank's output kept (capcore/launch.py)
  if ((nnodes > 1)); then
    launch+=" --nnodes $nnodes --node_rank $node_rank --rdzv_backend c10d --rdzv_endpoint $endpoint --rdzv_id capaware"
  else
    launch+=" --standalone"
  fi
fi

# GPUs: with several visible, the commands a stage runs at once (`jobs: k`) each get their own, the least busy
# (CUDA_VISIBLE_DEVICES per command), never all on GPU 0; under --nproc each command takes them all through torchrun
gpus=()
if [[ -n ${CUDA_VISIBLE_DEVICES:-} ]]; then
  IFS=, read -r -a gpus <<<"$CUDA_VISIBLE_DEVICES"
elif command -v nvidia-smi >/dev/null 2>&1; then
  mapfile -t gpus < <(nvidia-smi --query-gpu=index --format=csv,noheader 2>/dev/null || true)
fi
declare -A gpu_of=()  # a running command's pid -> its GPU
least_busy_gpu() {
  local g p best="" n fewest=1000000
  for p in "${!gpu_of[@]}"; do kill -0 "$p" 2>/dev/null || unset "gpu_of[$p]"; done
  for g in "${gpus[@]}"; do
    n=0
    for p in "${!gpu_of[@]}"; do [[ ${gpu_of[$p]} == "$g" ]] && n=$((n + 1)); done
    ((n < fewest)) && { fewest=$n; best=$g; }
  done
  echo "$best"
}

plan() { python -m capaware.pipeline_plan "$config" "${run_args[@]}" "$@"; }
plugins=$(plan plugins)  # a user's modules or files that every command imports first (capcore/plugins.py)
if [[ -n $plugins ]]; then export CAPAWARE_PLUGINS=$plugins; fi
plan validate >/dev/null  # every stage config, checked before the first stage runs (one error line if not)
mapfile -t stages < <(plan stages)
run=$(plan run-dir)
from=${from:-${stages[0]}} to=${to:-${stages[-1]}}
index() { local i; for i in "${!stages[@]}"; do [[ ${stages[$i]} == "$1" ]] && { echo "$i"; return; }; done
  echo "error: unknown stage '$1'; stages: ${stages[*]}" >&2; exit 2; }
lo=$(index "$from") || exit 2  # one line names the unknown stage; nothing after it runs
hi=$(index "$to") || exit 2
# what the stages still to run need (Java, weights, data folders, disk): checked in seconds, not hours in
force_arg=()
((force)) && force_arg=(--force)
LOCAL_WORLD_SIZE=$nproc plan preflight "$from" "$to" "${force_arg[@]}"  # ranks per machine share its memory
mkdir -p "$run/logs" "$run/.pipeline"
start=$(date +%s)

for ((i = lo; i <= hi; i++)); do
  stage=${stages[$i]} log="$run/logs/${stages[$i]}.log" marker="$run/.pipeline/${stages[$i]}.done"
  fingerprint=$(plan fingerprint "$stage")
  if ((force && node_rank == 0)); then
    rm -f "$marker"
    while read -r path; do [[ -n $path ]] && rm -rf -- "$path"; done < <(plan outputs "$stage")
  fi
  if [[ -f $marker && $(cat "$marker") == "$fingerprint" ]]; then
    echo "[$stage] complete, skipped"
    continue
  fi
  parallel=$(plan parallel "$stage")
  if ((node_rank > 0)) && [[ $parallel == no ]]; then  # another machine's share: node 0 runs this stage
    echo "[$stage] waiting for node 0 to finish it"
    until [[ -f $marker && $(cat "$marker") == "$fingerprint" ]]; do sleep 10; done
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
  ((${#commands[@]} >= max_jobs)) || max_jobs=${#commands[@]}  # one command alone gets every core, not a share
  ((max_jobs >= 1)) || max_jobs=1
  stage_launch=""
  if [[ $parallel == yes && -n $launch ]]; then stage_launch=$launch max_jobs=1; fi  # each command takes every process
  # up to $max_jobs commands at once (independent trainings), each into its own log part; with several
  # at once each gets its share of the cores (unless OMP_NUM_THREADS is set), not all of them
  threads=$(( $(nproc) / max_jobs )); ((threads >= 1)) || threads=1
  share=()
  ((max_jobs == 1)) || share=(env "OMP_NUM_THREADS=${OMP_NUM_THREADS:-$threads}")
  pids=() parts=() failed=""
  # the commands' progress lines (capcore/progress.py: stage one's finished rows), echoed as they are written;
  # $watcher is tail's own pid (its reader ends with it), left out of the running-jobs count below
  all_parts=() watcher=""
  for k in "${!commands[@]}"; do all_parts+=("$log.node$node_rank.part$k"); : >"${all_parts[$k]}"; done
  if ((${#all_parts[@]})); then  # (no files: tail would read stdin)
    tail -n +1 -F "${all_parts[@]}" 2>/dev/null > >(while IFS= read -r line; do
      [[ $line == *"progress: "* ]] && echo "[$stage] ${line##*progress: }"; done) &
    watcher=$!
  fi
  for k in "${!commands[@]}"; do
    cmd=${commands[$k]}
    [[ -n $cmd ]] || continue
    part="$log.node$node_rank.part$k"  # nodes sharing the run folder (--nnodes) each write their own parts
    echo "\$ $cmd" >"$part"
    device=() gpu=""
    if ((${#gpus[@]} > 1 && max_jobs > 1)) && [[ -z $stage_launch ]]; then
      gpu=$(least_busy_gpu)
      device=(env "CUDA_VISIBLE_DEVICES=$gpu")
      cmd="echo \"# CUDA_VISIBLE_DEVICES=\$CUDA_VISIBLE_DEVICES\"; $cmd"  # the command's own environment, in its log
    fi
    CAPAWARE_LAUNCH=$stage_launch CAPAWARE_RANK_LOGS="$run/logs/ranks/$stage" "${share[@]}" "${device[@]}" \
      bash -c "$cmd" >>"$part" 2>&1 &
    pids+=($!) parts+=("$part")
    [[ -z $gpu ]] || gpu_of[$!]=$gpu
    while (($(jobs -rp | grep -cvx "${watcher:-none}") >= max_jobs)); do wait -n || { failed=yes; break; }; done
    [[ -z $failed ]] || break  # a command failed: start no more
  done
  for k in "${!pids[@]}"; do
    wait "${pids[$k]}" || failed=yes
  done
  if [[ -n $watcher ]]; then  # the last lines reach tail -F (inotify; a poll where there is none), then stop following
    sleep 0.5
    kill "$watcher" 2>/dev/null || true
    wait "$watcher" 2>/dev/null || true
  fi
  for part in "${parts[@]}"; do cat "$part" >>"$log"; rm -f "$part"; done
  if [[ -n $failed ]]; then
    # (|| true: under pipefail a log without such a line, e.g. a killed command's, must still get its line)
    # capaware's own one-line error first: under --nproc, capcore.launch's line naming the dead rank, its exit
    # code or signal, its last line and its output file comes last (a rank's own error line is above it)
    last=$(tr '\r' '\n' <"$log" | grep -E '^error: ' | tail -n 1 | cut -c1-300 || true)
    [[ -n $last ]] || last=$(tr '\r' '\n' <"$log" | grep -E '^(error|[A-Za-z.]*(Error|Exception))' \
      | tail -n 1 | cut -c1-300 || true)
    [[ -n $last ]] || last=$(tr '\r' '\n' <"$log" | grep -v '^\s*$' | tail -n 1 | cut -c1-300 || true)
    echo "error: stage $stage failed: ${last#error: }  (full log: $log)" >&2
    exit 1
  fi
  if ((node_rank == 0)); then
    echo "$fingerprint" >"$marker.tmp" && mv "$marker.tmp" "$marker"
  else  # rank 0 (on node 0) still decodes and scores: the next rendezvous waits for it here, not in torchrun
    until [[ -f $marker && $(cat "$marker") == "$fingerprint" ]]; do sleep 10; done
  fi
  echo "[$stage] done in $(($(date +%s) - t0)) s" | tee -a "$log"  # in its log too: benchmarks/demo_time.py reads it
done

echo
while read -r table; do
  [[ -f $table ]] && { cat "$table"; echo; }
done < <(plan tables)
[[ -f $run/report/index.html ]] && echo "report: $run/report/index.html"
echo "pipeline finished in $(($(date +%s) - start)) s; every output under $run/"
