#!/usr/bin/env bash
# Stage one alone: train every method of CONFIG, evaluate retrieval, write tables under <run_dir>/results/.
# Usage: scripts/stage1_embedder.sh CONFIG [key=value ...]   (reruns resume; finished steps are skipped)
# The same as `python -m capaware.stage stage1 CONFIG [key=value ...]`, the pipeline's command.
set -euo pipefail
exec python -m capaware.stage stage1 "${@:?usage: $0 CONFIG [key=value ...]}"
