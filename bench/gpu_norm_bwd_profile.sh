#!/usr/bin/env bash
# On a GPU machine: why the folded norm backward (row group + weight
# gradient) stays under 85% of the copy bandwidth. Nsight Compute's
# throughput, occupancy, launch, warp-stall and memory sections for one
# layer's norm backward of the two-layer rotary step (A2R), in each build
# named by VARIANTS (default "default finishing": without and with
# --finishing-passes), text reports under OUT.
#
# Needs .gpu-artifacts (BENCH=1 runtime/test/gpu/pack-artifacts.sh) and
# .gpu-deps carried, as bench/gpu_inductor_ncu.sh does.
#
#   [VARIANTS="default finishing"] [OP=d_l0_mlp_norm_dot] bash bench/gpu_norm_bwd_profile.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_norm_bwd_profile.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
require_ncu
status=0
for v in ${VARIANTS:-default finishing}; do
  suffix=$([ "$v" = default ] && echo "" || echo "-$v")
  art=.gpu-artifacts/bench/A2R$suffix-h200-w1-prof.so
  names=.gpu-artifacts/bench/A2R$suffix-kernels.json
  # The kernel that makes OP in this build (names differ between builds).
  kernel=$(python3 -c "import json,sys; d=json.load(open(sys.argv[1])); \
print(next(k for k, n in d.items() if n == sys.argv[2]))" "$names" "${OP:-d_l0_mlp_norm_dot}") \
    || { echo "$v: no kernel for ${OP:-d_l0_mlp_norm_dot} in $names"; status=1; continue; }
  echo "== $v: $kernel"
  "$NCU" --clock-control none --kernel-name "regex:^$kernel\$" --launch-skip 1 --launch-count 1 \
    --section SpeedOfLight --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats --section MemoryWorkloadAnalysis \
    --metrics "regex:smsp__average_warps_issue_stalled_.*_per_issue_active\.ratio" \
    "$BUILD/bin/dc-run" "$art" --steps 2 --vocab 32000 > "$OUT/norm-bwd-$v.txt" 2>&1 \
    || { echo "$v: ncu failed"; tail -5 "$OUT/norm-bwd-$v.txt"; status=1; continue; }
  grep -E "Duration|DRAM Throughput|Memory Throughput|Registers Per|Block Size|Grid Size|Waves Per SM|Achieved Occupancy|Theoretical Occupancy|Block Limit|Stall|Warp Cycles Per Issued|Issued Warp|No Eligible|Active Warps Per Scheduler|Eligible Warps|L2 Hit|Mem Busy|Max Bandwidth|stalled" \
    "$OUT/norm-bwd-$v.txt" | sed 's/^ *//' | head -90
done
exit $status
