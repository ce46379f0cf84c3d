#!/usr/bin/env bash
# Stage two alone: dump att/fc features of CONFIG's backbone to its HDF5 file, then verify it
# (ids against the Karpathy json when the config names one), in one process.
# Usage: scripts/stage2_features.sh CONFIG [--force] [--skip-bad] [key=value ...]   (reruns resume)
set -euo pipefail
config=${1:?usage: $0 CONFIG [--force] [--skip-bad] [key=value ...]}
shift
python -m feature_extract --config "$config" --verify "$@"  # dump, then verify, in one process
