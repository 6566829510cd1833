#!/usr/bin/env bash
# The Hugging Face model suite's compile phase, here (the GPU machine has no
# MLIR): the steps bench/hf_frontend.py exported on the GPU machine (its
# OUT folder, HF) compiled for bench/gpu_hf_bench.sh: each family's f32
# step for one GPU (--target=h200) and for 2 host ranks (the batch-1-per-
# rank export, ZeRO-3), its bf16 step for one GPU; the token file and
# PyTorch's losses are copied beside them (the weights are made there).
#
#   bash bench/pack-hf-artifacts.sh HF [DEST]   (DEST: .gpu-artifacts/hf)
set -euo pipefail
cd "$(dirname "$0")/.."
HF=${1:?usage: pack-hf-artifacts.sh HF [DEST]}
DEST=${2:-.gpu-artifacts/hf}
BIN=${BUILD_DIR:-build}/bin
rm -rf "$DEST"
mkdir -p "$DEST"
cp "$HF"/export.json "$HF"/tokens.bin "$DEST"/
# Plain-PyTorch families come with their weights (made where they were
# exported); transformers' are made again on the GPU machine.
cp "$HF"/*-init.safetensors "$DEST"/ 2> /dev/null || true
for step in "$HF"/*-f32-b2.mlir; do
  m=$(basename "$step" -f32-b2.mlir)
  "$BIN/dc-compile" "$HF/$m-f32-b2.mlir" --world-size=1 --target=h200 -o "$DEST/$m-f32-gpu-w1.so"
  "$BIN/dc-compile" "$HF/$m-f32-b1.mlir" --world-size=2 --lowering=host -o "$DEST/$m-f32-host-w2.so"
  "$BIN/dc-compile" "$HF/$m-bf16-b2.mlir" --world-size=1 --target=h200 -o "$DEST/$m-bf16-gpu-w1.so"
  echo "compiled $m"
done
echo "packed $(du -sh "$DEST" | cut -f1) into $DEST"
