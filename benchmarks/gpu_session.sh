#!/usr/bin/env bash
# One call on a lent GPU machine (README, *Measured on a GPU*): benchmarks/bench_gpu.py, then the demo's
# training stages (data -> stage1 -> features -> captioners -> rl) on CUDA with `precision: auto`.
# The scores and report stages are left out: they are Java and CPU work (PTB tokenizer, METEOR), and
# METEOR's data alone (62 MB) would not travel to that machine.
#
#   bash benchmarks/gpu_session.sh [SECONDS]    (default 540: the whole script's budget)
#
# Writes env.txt, bench_gpu.{txt,json}, demo.txt and demo_files.tgz (every small text file of the run)
# to $OUT (the device tool's folder) or /tmp/gpu_out. Packages the GPU image lacks (gensim, POT, nltk,
# OmegaConf, pycocoevalcap without its jars, pytorch-metric-learning) come as .devsite/site.tgz, made
# here from their cp312 wheels and unpacked there into /tmp/site.
set -u
budget=${1:-540}
start=$(date +%s)
out=${OUT:-/tmp/gpu_out}
mkdir -p "$out"
export PYTHONUNBUFFERED=1
if [[ -f .devsite/site.tgz ]]; then
  mkdir -p /tmp/site && tar xzf .devsite/site.tgz -C /tmp/site && export PYTHONPATH=/tmp/site:$PWD
fi
# the pipeline calls `python`; the image may only have python3
mkdir -p /tmp/bin && printf '#!/bin/sh\nexec %s "$@"\n' "$(command -v python3)" >/tmp/bin/python \
  && chmod +x /tmp/bin/python
export PATH=/tmp/bin:$PATH
{
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv,noheader
  echo "cores: $(nproc); $(grep -m1 'model name' /proc/cpuinfo)"
  python -c "import torch, gensim, ot, omegaconf, pycocoevalcap, nltk, pytorch_metric_learning; \
print('torch', torch.__version__, 'cuda', torch.cuda.is_available(), \
'gensim', gensim.__version__, 'POT', ot.__version__)"
} 2>&1 | tee "$out/env.txt"

timeout 150 python benchmarks/bench_gpu.py --json "$out/bench_gpu.json" 2>&1 | tee "$out/bench_gpu.txt"

left=$((budget - ($(date +%s) - start) - 25))
run=/tmp/demo_gpu
t0=$(date +%s)
timeout "$left" bash scripts/pipeline.sh configs/demo/pipeline_demo.yaml --to rl --run "$run" 2>&1 | tee "$out/demo.txt"
echo "demo exit ${PIPESTATUS[0]} after $(($(date +%s) - t0)) s (limit ${left} s)" | tee -a "$out/demo.txt"
(cd "$run" && find . -type f -size -2M \( -name '*.log' -o -name '*.json' -o -name '*.md' -o -name '*.txt' \
  -o -name '*.yaml' -o -name '*.csv' -o -name '*.done' -o -name '*.part*' \) -print0 \
  | tar czf "$out/demo_files.tgz" --null -T -)
nvidia-smi --query-gpu=memory.used,memory.total --format=csv,noheader >>"$out/env.txt" 2>&1
echo "gpu_session: $(($(date +%s) - start)) s in all"
