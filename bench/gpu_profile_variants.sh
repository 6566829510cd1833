#!/usr/bin/env bash
# Per-op profiles of several builds of one step, their named kernels
# (bench/kernel_table.py's RMSNorm, SwiGLU, rotary, ...) side by side: one
# device call compares code generation choices. DIR holds NAME.so, each
# compiled with --profile-ops, beside NAME.mlir, the IR dc-compile printed
# before dc-profile-ops (--mlir-print-ir-before=dc-profile-ops
# --mlir-elide-elementsattrs-if-larger=16, as pack-artifacts.sh does). Each
# build is profiled ROUNDS times (default 2), the builds in turn, so that a
# drift of the device between runs shows as a difference between rounds.
# Needs the runtime-only build runtime/test/gpu/run.sh (or gpu_env.sh) makes.
#
#   bash bench/gpu_profile_variants.sh OUT [DIR]   (DIR: .gpu-artifacts/variants)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_profile_variants.sh OUT [DIR]}
DIR=${2:-.gpu-artifacts/variants}
mkdir -p "$OUT"
source bench/gpu_env.sh
runs=()
for round in $(seq "${ROUNDS:-2}"); do
  for so in "$DIR"/*.so; do
    name=$(basename "$so" .so)
    profile="$OUT/$name-$round.json"
    timeout "${RUN_TIMEOUT_S:-120}" "$BUILD/bin/dc-run" "$so" --nproc 1 --steps 3 \
      --vocab "${VOCAB:-32000}" --profile-out "$profile" > "$OUT/$name-$round.log" 2>&1 ||
      { echo "$name round $round FAILED"; tail -3 "$OUT/$name-$round.log"; continue; }
    runs+=("$name/$round=$DIR/$name.mlir,$profile")
  done
done
python3 bench/kernel_table.py --compare "${runs[@]}" | tee "$OUT/variants.md"
