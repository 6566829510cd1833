#!/usr/bin/env bash
# On a GPU machine: recomputation is exact on the GPU too. Every artifact
# NAME-rNN-h200.so in ART (a step compiled with --recompute under a budget)
# trains STEPS steps and must report bit-identical losses and gradient
# norms to NAME-none-h200.so (the same step without a budget); any
# NAME-*-cpu.so runs one step on the host beside them.
#
#   ART=DIR bash bench/gpu_remat_check.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_remat_check.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/remat}
STEPS=${STEPS:-3}
status=0
run() { # NAME STEPS
  timeout 300 "$BUILD/bin/dc-run" --nproc 1 "$ART/$1.so" --steps "$2" --vocab "${VOCAB:-1024}" \
    > "$OUT/$1.log" 2>&1 || echo "$1: dc-run failed (rc $?): $(tail -1 "$OUT/$1.log")"
  grep -E "^step=" "$OUT/$1.log" | cut -d' ' -f1-3 | tr '\n' ' '; echo " <- $1"
}
for so in "$ART"/*-none-h200*.so; do
  [ -f "$so" ] || { echo "no NAME-none-h200*.so in $ART"; exit 1; }
  base=$(basename "$so" .so)
  run "$base" "$STEPS"
  for r in "$ART"/${base%%-none-h200*}-r*-h200${base#*-none-h200}.so; do
    [ -f "$r" ] || continue
    name=$(basename "$r" .so)
    run "$name" "$STEPS"
    python3 test/Runtime/Inputs/losses.py --rtol 0 "$OUT/$base.log" "$OUT/$name.log" \
      > "$OUT/$name.cmp" 2>&1 && echo "$name: bit-identical to $base" \
      || { echo "$name: DIFFERS from $base: $(tail -2 "$OUT/$name.cmp")"; status=1; }
  done
done
for so in "$ART"/*-cpu.so; do
  [ -f "$so" ] && run "$(basename "$so" .so)" 1
done
exit $status
