#!/usr/bin/env bash
# Linear probes over seeds (issue #25): what the two "Img" stand-ins and the Cap trunks fine-tuned from them carry
# about each caption attribute group. Needs a finished demo run (its data):
#   studies/probes/probe_seeds.sh RUN SEED...        e.g. studies/probes/probe_seeds.sh runs/demo 0 1 2
# For each pretrain.targets (identity, attributes) and seed, one replicate under RUN/probe/<targets>/s<seed>/:
# class pretraining and the log-ratio + dense stage-one row with that seed (studies/probes/configs/probe_caption.yaml),
# then stage two's pooled features of both trunks. The two targets run side by side, one core each. Then
# studies.probes.probe fits the probes and writes RUN/results/probe/probe.{md,json}.
set -euo pipefail
cd "$(dirname "$0")/../.."
usage="usage: $0 RUN SEED..."
run=${1:?$usage}
shift
(($#)) || { echo "error: no seeds given; $usage" >&2; exit 2; }
for seed in "$@"; do
  [[ $seed =~ ^[0-9]+$ ]] || { echo "error: seed '$seed' is not a whole number; $usage" >&2; exit 2; }
done
[[ -f $run/data/captions/dataset_coco.json ]] || {
  echo "error: $run/data/captions/dataset_coco.json is missing; run make demo (or scripts/pipeline.sh) first" >&2
  exit 2
}

replicate() {  # targets seed
  local out="$run/probe/$1/s$2"
  mkdir -p "$out"
  # same labels: reused when they match
  [[ -f $run/caption/labels.h5 && ! -f $out/labels.h5 ]] && cp "$run/caption/labels.h5" "$out/"
  python -m embedder.rows --config studies/probes/configs/probe_caption.yaml --results "$out/results" run_dir="$run" \
    seed="$2" pretrain.targets="$1" out_dir="$out"
  for set in img cap; do
    ckpt="$out/class_pretrained/model.pt"
    [[ $set == cap ]] && ckpt="$out/methods/l_log_ratio_m_dense/model.pt"
    python -m feature_extract --config configs/demo/demo_features_img.yaml --verify run_dir="$run" out="$out/$set.h5" \
      backbone.checkpoint="$ckpt"
  done
}

export OMP_NUM_THREADS=1
pids=()
for targets in identity attributes; do
  ( for seed in "$@"; do replicate "$targets" "$seed"; done ) >"$run/probe_$targets.log" 2>&1 &
  pids+=($!)
done
for pid in "${pids[@]}"; do
  wait "$pid" || {
    echo "error: a replicate failed; see $run/probe_identity.log and $run/probe_attributes.log" >&2
    exit 1
  }
done
feats=()
for seed in "$@"; do
  feats+=("Img-identity=$run/probe/identity/s$seed/img.h5" "Cap-from-identity=$run/probe/identity/s$seed/cap.h5"
          "Img-attributes=$run/probe/attributes/s$seed/img.h5"
          "Cap-from-attributes=$run/probe/attributes/s$seed/cap.h5")
done
python -m studies.probes.probe --karpathy "$run/data/captions/dataset_coco.json" --features "${feats[@]}" \
  --out "$run/results/probe" \
  --paired Cap-from-identity=Img-identity Cap-from-attributes=Img-attributes Img-attributes=Img-identity
