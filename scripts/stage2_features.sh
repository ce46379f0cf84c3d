#!/usr/bin/env bash
# Stage two alone: dump att/fc features of CONFIG's backbone to its HDF5 file, then verify it
# (ids against the Karpathy json when the config names one).
# Usage: scripts/stage2_features.sh CONFIG [--force] [--skip-bad] [key=value ...]   (reruns resume)
set -euo pipefail
config=${1:?usage: $0 CONFIG [--force] [--skip-bad] [key=value ...]}
shift
python -m feature_extract --config "$config" "$@"
# shellcheck disable=SC2046  # word splitting of the printed arguments is intended (no spaces in them)
python -m feature_extract.verify $(python - "$config" "$@" <<'PY'
import sys
from feature_extract.config import load_features_config
cfg = load_features_config(sys.argv[1], [a for a in sys.argv[2:] if not a.startswith("--")])
print(cfg.out, f"--images {cfg.images.karpathy}" if cfg.images.karpathy else "")
PY
)
