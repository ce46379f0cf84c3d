#!/usr/bin/env bash
# Stage one alone: train every method of CONFIG, evaluate retrieval, write tables under <run_dir>/results/.
# Usage: scripts/stage1_embedder.sh CONFIG [key=value ...]   (reruns resume; finished steps are skipped)
set -euo pipefail
config=${1:?usage: $0 CONFIG [key=value ...]}
shift
exec ${CAPAWARE_LAUNCH:-python} -m embedder.study --config "$config" "$@"  # CAPAWARE_LAUNCH: torchrun (scripts/pipeline.sh --nproc)
