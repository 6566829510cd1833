#!/usr/bin/env bash
# On a GPU machine: Nsight Compute's kernel durations of dc's generated
# kernels beside torch.compile (Inductor)'s for the same memory-bound ops
# at config A's shapes (RMSNorm, SwiGLU, residual add, cross-entropy,
# rotary; forward and backward): the like-for-like comparison, as per-op
# events count launch gaps on dc's side and CUDA-graph replays none on
# Inductor's. Both sides run under the same Nsight Compute settings: clocks
# as a step runs them (CLOCKS=none; base holds them at the base clock),
# caches flushed before each kernel.
#
# dc's side is the two-layer rotary step pack-artifacts.sh (BENCH=1)
# compiles with a map of its kernels to ops (A2R-kernels.json, from
# bench/kernel_names.py); Inductor's, bench/kernel_bench.py --ncu-marks.
#
# Each dc kernel is timed in STEPS (default 3) steps, each Inductor op in
# REPEAT (default 5) calls; the table gives medians.
#
# VARIANTS="a b" compares several builds of that step against one run of
# Inductor's side: .gpu-artifacts/bench/A2R-a-h200-w1-prof.so with
# A2R-a-kernels.json, and so on (one table each, ncu-side-by-side-a.md);
# "default" names the build without options.
#
#   [CLOCKS=none|base] [STEPS=3] [REPEAT=5] [VARIANTS="a b"] bash bench/gpu_inductor_ncu.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_inductor_ncu.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
require_ncu
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum,launch__grid_size,launch__block_size,launch__registers_per_thread
# dc's side for one build ($1 artifact, $2 kernel names, $3 suffix of
# its files) and its table beside Inductor's.
compare_build() {
  # The kernels of the ops compared (ncu_side_by_side.py's patterns).
  local kernels
  kernels=$(python3 - "$2" << 'PY'
import json, re, sys
sys.path.insert(0, "bench")
from ncu_side_by_side import OPS
names = json.load(open(sys.argv[1]))
print("|".join(k for k, n in names.items() if any(re.search(p, n) for _, p, _ in OPS)))
PY
  )
  [ -n "$kernels" ] || { echo "no kernels of the compared ops in $2"; return 1; }
  "$NCU" --csv --page raw --metrics "$METRICS" --clock-control "${CLOCKS:-none}" \
    --kernel-name "regex:^($kernels)$" \
    "$BUILD/bin/dc-run" "$1" --steps "${STEPS:-3}" --vocab 32000 > "$OUT/dc-ncu$3.csv" 2> "$OUT/dc-ncu$3.err" \
    || { echo "ncu on dc-run $1 failed:"; tail -5 "$OUT/dc-ncu$3.err"; }
  python3 bench/ncu_side_by_side.py "$2" "$OUT/dc-ncu$3.csv" "$OUT/inductor-ncu.csv" \
    | tee "$OUT/ncu-side-by-side$3.md"
}
"$NCU" --csv --page raw --metrics "$METRICS" --clock-control "${CLOCKS:-none}" \
  --nvtx --nvtx-include "dc_measure/" \
  python3 bench/kernel_bench.py --ncu-marks --repeat "${REPEAT:-5}" > "$OUT/inductor-ncu.csv" 2> "$OUT/inductor-ncu.err" \
  || { echo "ncu on kernel_bench.py failed:"; tail -5 "$OUT/inductor-ncu.err"; }
if [ -z "${VARIANTS:-}" ]; then
  compare_build "${ART:-.gpu-artifacts/bench/A2R-h200-w1-prof.so}" \
    "${NAMES:-.gpu-artifacts/bench/A2R-kernels.json}" ""
  exit 0
fi
for v in $VARIANTS; do
  echo "== $v"
  if [ "$v" = default ]; then
    compare_build .gpu-artifacts/bench/A2R-h200-w1-prof.so .gpu-artifacts/bench/A2R-kernels.json "-$v"
  else
    compare_build ".gpu-artifacts/bench/A2R-$v-h200-w1-prof.so" ".gpu-artifacts/bench/A2R-$v-kernels.json" "-$v"
  fi
done
