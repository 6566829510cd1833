#!/usr/bin/env bash
# Predicted plans of Mixtral-8x7B (dc-gen-llama's mixtral-8x7b preset: 8
# experts of width 14336, top-2, every layer MoE; bf16, fused attention,
# 4096 tokens per rank) on 32 H100 (the h100-cluster preset: 4 nodes x 8),
# here, no GPU: ZeRO-3 alone and ZeRO-3 with expert parallelism 8, each
# dropless and with a capacity factor, dc's schedule and just in time. For
# each plan: dc-report's summary lines and the wall / user time of dc-opt.
#
#   bash bench/predict_moe_ep.sh OUT     (BUILD_DIR: default build;
#                                         CAPACITY: default 1.25)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: predict_moe_ep.sh OUT}
BIN=${BUILD_DIR:-build}/bin
CAPACITY=${CAPACITY:-1.25}
mkdir -p "$OUT"
export PYTHONPATH=$PWD/python
"$BIN/dc-gen-llama" --config mixtral-8x7b --attention fused --dtype bf16 \
  -o "$OUT/mixtral.mlir"
"$BIN/dc-gen-llama" --config mixtral-8x7b --attention fused --dtype bf16 \
  --capacity-factor "$CAPACITY" -o "$OUT/mixtral-c$CAPACITY.mlir"
plan() { # NAME MLIR OPTIONS
  local name=$1 mlir=$2 options=$3
  echo "== $name: --dc-zero3-pipeline=\"world-size=32 target=h100-cluster recompute=true $options\""
  /usr/bin/time -f "compile: %e s wall, %U s user, %M KB" "$BIN/dc-opt" "$mixtral_dir/$mlir" \
    --dc-zero3-pipeline="world-size=32 target=h100-cluster recompute=true $options" \
    --dc-report -o /dev/null > "$OUT/$name.report" 2> "$OUT/$name.time" \
    || { echo "FAILED"; tail -5 "$OUT/$name.time"; return 0; }
  grep -E "predicted step|compute busy|collectives busy|exposed|gathers|all-to-alls|peak|recomputed" "$OUT/$name.report" || true
  tail -1 "$OUT/$name.time"
}
mixtral_dir=$OUT
jit="prefetch=false selective-gather=false"
plan zero3-dc mixtral.mlir ""
plan zero3-c-dc "mixtral-c$CAPACITY.mlir" ""
plan ep8-jit mixtral.mlir "expert-parallel=8 $jit"
plan ep8-dc mixtral.mlir "expert-parallel=8"
plan ep8-c-jit "mixtral-c$CAPACITY.mlir" "expert-parallel=8 $jit"
plan ep8-c-dc "mixtral-c$CAPACITY.mlir" "expert-parallel=8"
