#!/usr/bin/env bash
# Compiles the Hugging Face steps bench/hf_frontend.py exported on a machine
# with torch 2.x and transformers (its OUT folder, HF) for
# bench/gpu_hf_bench.sh: each model's f32 step for one GPU (--target=h200)
# and for 2 host ranks (the batch-1-per-rank export), its bf16 step for one
# GPU; the weights, tokens and PyTorch's losses are copied beside them.
#
#   bash bench/pack-hf-artifacts.sh HF [DEST]   (DEST: .gpu-artifacts/hf)
set -euo pipefail
cd "$(dirname "$0")/.."
HF=${1:?usage: pack-hf-artifacts.sh HF [DEST]}
DEST=${2:-.gpu-artifacts/hf}
BIN=${BUILD_DIR:-build}/bin
rm -rf "$DEST"
mkdir -p "$DEST"
cp "$HF"/export.json "$HF"/tokens.bin "$HF"/*-init.safetensors "$DEST"/
for init in "$HF"/*-init.safetensors; do
  m=$(basename "$init" -init.safetensors)
  "$BIN/dc-compile" "$HF/$m-f32-b2.mlir" --world-size=1 --target=h200 -o "$DEST/$m-f32-gpu-w1.so"
  "$BIN/dc-compile" "$HF/$m-f32-b1.mlir" --world-size=2 -o "$DEST/$m-f32-host-w2.so"
  "$BIN/dc-compile" "$HF/$m-bf16-b2.mlir" --world-size=1 --target=h200 -o "$DEST/$m-bf16-gpu-w1.so"
  echo "compiled $m"
done
