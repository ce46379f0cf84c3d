#!/usr/bin/env bash
# The embedded-default demo (README command 1, `make demo`): `capaware demo`, the whole pipeline of
# configs/demo/pipeline_demo.yaml on a CPU, every output under runs/demo/. Extra arguments go to the
# pipeline (--from STAGE, --to STAGE, --force, --run DIR).
set -euo pipefail
cd "$(dirname "$0")/.."
exec python -m capaware demo "$@"
