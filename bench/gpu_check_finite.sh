#!/usr/bin/env bash
# On a GPU machine: what the finite-value checks cost. Two layers of config
# A (bf16, fused attention; runtime/test/gpu/pack-artifacts.sh compiles
# them) trained 20 steps without the checks, with them compiled in but off,
# and on (dc-run --check-finite); the median step of each (steps 2-20).
#
#   bash bench/gpu_check_finite.sh OUT     (ART: default .gpu-artifacts/check-finite)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_check_finite.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/check-finite}
echo "| step | checks | median step (ms) |"
echo "|---|---|---|"
for run in "A2:none:A2-h200-w1.so:" "A2:compiled, off:A2-checked-h200-w1.so:" \
           "A2:on:A2-checked-h200-w1.so:--check-finite"; do
  IFS=: read -r model what so flag <<< "$run"
  log="$OUT/$model-$(echo "$what" | tr -dc a-z).log"
  "$BUILD/bin/dc-run" "$ART/$so" --steps 20 $flag > "$log" 2>&1 \
    || { echo "FAILED: $so $flag"; tail -3 "$log"; continue; }
  median=$(grep -o "median [0-9.]* ms" "$log" | awk '{print $2}')
  echo "| $model | $what | $median |"
done
