#!/usr/bin/env bash
# The embedded-default demo (README command 1, `make demo`): the whole pipeline of
# configs/demo/pipeline_demo.yaml on a CPU, every output under runs/demo/. Extra arguments go to
# scripts/pipeline.sh (--from STAGE, --to STAGE, --force, --run DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
exec bash scripts/pipeline.sh configs/demo/pipeline_demo.yaml "$@"
