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
#   [CLOCKS=none|base] bash bench/gpu_inductor_ncu.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_inductor_ncu.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/bench/A2R-h200-w1-prof.so}
NAMES=${NAMES:-.gpu-artifacts/bench/A2R-kernels.json}
NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
[ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
METRICS=gpu__time_duration.sum,dram__bytes_read.sum,dram__bytes_write.sum
# The kernels of the ops compared (ncu_side_by_side.py's patterns).
kernels=$(python3 - "$NAMES" << 'PY'
import json, re, sys
sys.path.insert(0, "bench")
from ncu_side_by_side import OPS
names = json.load(open(sys.argv[1]))
print("|".join(k for k, n in names.items() if any(re.search(p, n) for _, p, _ in OPS)))
PY
)
[ -n "$kernels" ] || { echo "no kernels of the compared ops in $NAMES"; exit 1; }
"$NCU" --csv --page raw --metrics "$METRICS" --clock-control "${CLOCKS:-none}" \
  --kernel-name "regex:^($kernels)$" \
  "$BUILD/bin/dc-run" "$ART" --steps 1 --vocab 32000 > "$OUT/dc-ncu.csv" 2> "$OUT/dc-ncu.err" \
  || { echo "ncu on dc-run failed:"; tail -5 "$OUT/dc-ncu.err"; }
"$NCU" --csv --page raw --metrics "$METRICS" --clock-control "${CLOCKS:-none}" \
  --nvtx --nvtx-include "dc_measure/" \
  python3 bench/kernel_bench.py --ncu-marks > "$OUT/inductor-ncu.csv" 2> "$OUT/inductor-ncu.err" \
  || { echo "ncu on kernel_bench.py failed:"; tail -5 "$OUT/inductor-ncu.err"; }
python3 bench/ncu_side_by_side.py "$NAMES" "$OUT/dc-ncu.csv" "$OUT/inductor-ncu.csv" \
  | tee "$OUT/ncu-side-by-side.md"
