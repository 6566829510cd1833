#!/usr/bin/env bash
# The mixture-of-experts GPU runs' compile phase, here (the GPU machine has
# no MLIR):
#  - the model suite's MoE families in plain PyTorch (test/Frontend/Inputs/
#    families.py, which torch 1.13 traces here), exported with their weights
#    and PyTorch's f32 losses and compiled for one GPU (f32, bf16) and 2
#    host ranks, into DEST/families: `ART=DEST/families bash
#    bench/gpu_hf_bench.sh OUT` trains them there;
#  - dc-gen-llama's mixtral-1gpu step (bf16, rotary, fused attention) for
#    one GPU, plain and with per-op profiling (its IR beside it, for
#    bench/profile_by_kind.py), and with its AdamW inside the step (bf16
#    state, as PyTorch keeps it for bf16 parameters), into DEST/moe-step:
#    bench/gpu_moe_step_bench.sh times it against PyTorch there.
#
#   bash bench/pack-moe-artifacts.sh [DEST]   (DEST: .gpu-artifacts)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.gpu-artifacts}
BIN=${BUILD_DIR:-build}/bin
FAMILIES=${FAMILIES:-mixtral mixtral_stacked qwen2_moe deepseek_v3 mixtral_aux}
src=$(mktemp -d)
trap 'rm -rf "$src"' EXIT
# SKIP_FAMILIES=1: the step's artifacts only.
if [ "${SKIP_FAMILIES:-0}" != 1 ]; then
  /usr/bin/python3 bench/hf_frontend.py export "$src/families" --plain --steps 20 --models $FAMILIES
  bash bench/pack-hf-artifacts.sh "$src/families" "$DEST/families"
fi
step=$DEST/moe-step
rm -rf "$step" && mkdir -p "$step"
"$BIN/dc-gen-llama" --config mixtral-1gpu --rotary --dtype bf16 --attention fused -o "$src/mixtral-1gpu.mlir"
/usr/bin/time -f "dc-compile --target=h200 mixtral-1gpu: %e s, %M KB" \
  "$BIN/dc-compile" "$src/mixtral-1gpu.mlir" --world-size=1 --target=h200 -o "$step/mixtral-1gpu-h200-w1.so"
"$BIN/dc-compile" "$src/mixtral-1gpu.mlir" --world-size=1 --target=h200 --profile-ops \
  --mlir-print-ir-before=dc-profile-ops --mlir-elide-elementsattrs-if-larger=16 \
  -o "$step/mixtral-1gpu-h200-w1-prof.so" 2> "$step/mixtral-1gpu-prof.mlir"
/usr/bin/time -f "dc-compile --target=h200 --optimizer-in-step mixtral-1gpu: %e s, %M KB" \
  "$BIN/dc-compile" "$src/mixtral-1gpu.mlir" --world-size=1 --target=h200 --optimizer-in-step \
  --master-dtype=bf16 --moment-dtype=bf16 -o "$step/mixtral-1gpu-in-step-h200-w1.so"
du -sh "$step"
