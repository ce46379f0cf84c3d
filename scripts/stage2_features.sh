#!/usr/bin/env bash
# Stage two alone: dump att/fc features of CONFIG's backbone to its HDF5 file, then verify it
# (ids against the Karpathy json when the config names one), in one process.
# Usage: scripts/stage2_features.sh CONFIG [--force] [--skip-bad] [key=value ...]   (reruns resume)
# The same as `python -m capaware.stage features CONFIG ...`, the pipeline's command.
set -euo pipefail
exec python -m capaware.stage features "${@:?usage: $0 CONFIG [--force] [--skip-bad] [key=value ...]}"
