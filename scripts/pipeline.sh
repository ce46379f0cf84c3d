#!/usr/bin/env bash
# The staged pipeline from a checkout: the same as `capaware run CONFIG [--from STAGE] [--to STAGE] [--force]
# [--run DIR] [--nproc N ...]` (capaware/pipeline.sh, planned by capaware.pipeline_plan).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m capaware run "$@"
