#!/usr/bin/env bash
# The embedded-default demo: every stage on synthetic data in the real formats, on a CPU.
# Stage one: pose, layout and caption retrieval studies (data generated on first use). Tables -> results/.
set -euo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
for track in pose layout caption; do
  bash scripts/stage1_embedder.sh "configs/demo_${track}.yaml"
done
echo
for track in pose layout caption; do cat "results/demo_${track}/retrieval.md"; echo; done
echo "demo finished in $(( $(date +%s) - start )) s; tables, JSON and curves under results/"
