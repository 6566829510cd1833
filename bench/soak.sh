#!/usr/bin/env bash
# Fault tolerance, long form (test/Runtime/dc-run-soak.test is the short
# one CI runs): dc-gen-llama's tiny Llama compiled for 2 host ranks (a few
# milliseconds a step, so that a kill lands near its step), 300 steps, a
# checkpoint every 20; the job is killed with SIGKILL at 5 random steps and
# restarted with --resume each time; its last checkpoint must be
# byte-identical to an uninterrupted run's. After ./build.sh.
#
#   bash bench/soak.sh [OUT]      (SEED, KILLS, STEPS, EVERY to vary it)
set -euo pipefail
cd "$(dirname "$0")/.."
OUT=${1:-build/soak}
BIN=${BUILD_DIR:-build}/bin
rm -rf "$OUT" && mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
"$BIN/dc-gen-llama" --config tiny -o "$OUT/tiny.mlir"
"$BIN/dc-compile" "$OUT/tiny.mlir" --world-size=2 --lowering=host -o "$OUT/tiny-w2.so"
PATH=$BIN:$PATH python3 test/Runtime/Inputs/soak.py --work "$OUT" --steps "${STEPS:-300}" \
  --every "${EVERY:-20}" --kills "${KILLS:-5}" --seed "${SEED:-$RANDOM}" --timeout 600 \
  -- dc-run --nproc 2 "$OUT/tiny-w2.so" --lr 0.01
