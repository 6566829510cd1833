#!/usr/bin/env bash
# The compute of whole compiled steps on one GPU (no sharding): config A
# (16 layers) and B of ../shared/BENCHMARKS.md, compiled here with
# dc-compile --target=h200 --world-size=1 into .gpu-artifacts/bench/ (see
# pack-artifacts.sh), timed by dc-run with and without CUDA graphs, plus a
# profiling run of B and A whose per-op times (events around each op) are summed
# by kind of op. Needs the runtime-only build runtime/test/gpu/run.sh makes.
# CONFIGS (default "A16 B") picks the configs, GRAPHS (default "0 1") the
# runs without and with CUDA graphs, PROFILE=0 skips the profiles, and
# STATES (default "f32,f32") the AdamW state dtypes (master,moments) of
# each timed run, e.g. STATES="f32,f32 bf16,bf16".
#
#   bash bench/gpu_step_bench.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_step_bench.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
BIN=$BUILD/bin
ART=.gpu-artifacts/bench
# Line-buffered, each run bounded: a slow or stuck run still leaves its log.
RUN="timeout ${RUN_TIMEOUT_S:-120} stdbuf -oL -eL $BIN/dc-run --nproc 1"
for c in ${CONFIGS:-A16 B}; do
  for state in ${STATES:-f32,f32}; do
    for g in ${GRAPHS:-0 1}; do
      graphs=""; [ "$g" = 1 ] && graphs=--cuda-graphs
      log="$OUT/$c$graphs-${state/,/-}.log"
      echo "== $c $graphs state $state"
      $RUN "$ART/$c-h200-w1.so" --steps 6 --vocab 32000 $graphs \
        --master-dtype "${state%,*}" --moment-dtype "${state#*,}" \
        > "$log" 2>&1 || { echo "FAILED (rc $?)"; tail -5 "$log"; break; }
      grep -E "^dc-run|^step=|summary" "$log" | tail -4
    done
  done
done
[ "${PROFILE:-1}" = 0 ] && exit 0
for c in B A16; do
  echo "== $c per-op profile"
  $RUN "$ART/$c-h200-w1-prof.so" --steps 3 --vocab 32000 \
    --profile-out "$OUT/$c-profile.json" > "$OUT/$c-prof.log" 2>&1 || { tail -5 "$OUT/$c-prof.log"; continue; }
  # By kind of op, from the IR the profile keys count in (pack-artifacts.sh).
  python3 bench/profile_by_kind.py "$ART/$c-h200-w1-prof.mlir" "$OUT/$c-profile.json" \
    --top 20 | tee "$OUT/$c-profile-by-kind.md"
done
# dc's generated kernels and products in A's profile beside Inductor and
# torch.matmul on the same ops and shapes (KERNELS=0 skips).
[ "${KERNELS:-1}" = 0 ] && exit 0
# The rotations of a rotary embedding, from two layers of A with them.
if [ -f "$ART/A2R-h200-w1-prof.so" ]; then
  echo "== A2R (rotary) per-op profile"
  $RUN "$ART/A2R-h200-w1-prof.so" --steps 3 --vocab 32000 \
    --profile-out "$OUT/A2R-profile.json" > "$OUT/A2R-prof.log" 2>&1 || tail -5 "$OUT/A2R-prof.log"
fi
extra=()
[ -f "$OUT/A2R-profile.json" ] && extra=(--extra "$ART/A2R-h200-w1-prof.mlir" "$OUT/A2R-profile.json")
if [ -f "$OUT/A16-profile.json" ] && python3 -c "import torch" 2> /dev/null; then
  echo "== kernels of A against PyTorch"
  timeout 300 python3 bench/kernel_bench.py --gemms "$ART/A16-gemms.json" \
    --out "$OUT/peer-kernels.json" > "$OUT/peer-kernels.log" 2>&1 || tail -20 "$OUT/peer-kernels.log"
  python3 bench/kernel_table.py "$ART/A16-h200-w1-prof.mlir" "$OUT/A16-profile.json" \
    "$OUT/peer-kernels.json" "${extra[@]}" | tee "$OUT/A16-kernels.md"
fi

