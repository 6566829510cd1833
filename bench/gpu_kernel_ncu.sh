#!/usr/bin/env bash
# Nsight Compute counters of chosen generated kernels of a compiled step
# (config A by default), one launch each: time, DRAM and SM throughput,
# registers, occupancy, issue-slot use, the top warp stall reasons. Which
# kernel is which op: compile the step here with
#   dc-compile A16.mlir --world-size=1 --target=h200 \
#     --mlir-print-ir-after=dc-merge-kernel-modules --mlir-print-debuginfo
# and read each gpu.launch_func's kernel name and location.
#
# Nsight Compute holds the clocks at base by default; CLOCKS=none leaves them
# as a step runs them (the durations to set beside a step's profile).
#
#   KERNELS='train_step_kernel_(0|145)' [CLOCKS=none] bash bench/gpu_kernel_ncu.sh OUT [ARTIFACT]
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_kernel_ncu.sh OUT [ARTIFACT]}
ART=${2:-.gpu-artifacts/bench/A16-h200-w1.so}
mkdir -p "$OUT"
source bench/gpu_env.sh
require_ncu
METRICS=gpu__time_duration.sum,dram__throughput.avg.pct_of_peak_sustained_elapsed
METRICS+=,dram__bytes_read.sum,dram__bytes_write.sum
METRICS+=,sm__throughput.avg.pct_of_peak_sustained_elapsed
METRICS+=,sm__inst_executed.avg.per_cycle_active,smsp__issue_active.avg.pct_of_peak_sustained_active
METRICS+=,launch__registers_per_thread,launch__grid_size,launch__block_size
METRICS+=,launch__occupancy_limit_registers,launch__occupancy_limit_shared_mem
METRICS+=,sm__warps_active.avg.pct_of_peak_sustained_active
METRICS+=,smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio
METRICS+=,smsp__average_warp_latency_issue_stalled_barrier.ratio
METRICS+=,smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio
METRICS+=,smsp__average_warp_latency_issue_stalled_mio_throttle.ratio
METRICS+=,smsp__average_warp_latency_issue_stalled_lg_throttle.ratio
METRICS+=,smsp__average_warp_latency_issue_stalled_wait.ratio
"$NCU" --csv --page raw --metrics "$METRICS" --clock-control "${CLOCKS:-base}" \
  --kernel-name "regex:^(${KERNELS:-train_step_kernel_(0|5|7|145|149|150|153|154|456|1)})$" \
  "$BUILD/bin/dc-run" "$ART" --steps 1 --vocab 32000 > "$OUT/ncu.csv" 2> "$OUT/ncu.err"
rc=$?
tail -3 "$OUT/ncu.err"
python3 - "$OUT/ncu.csv" << 'PY'
import csv, sys
# dc-run's own output comes first; the table starts at its "ID" header.
lines = open(sys.argv[1]).read().splitlines()
start = next(i for i, line in enumerate(lines) if line.startswith('"ID"'))
rows = list(csv.reader(lines[start:]))
head, units, data = rows[0], rows[1], rows[2:]
def col(name): return head.index(name)
keys = ["Kernel Name", "gpu__time_duration.sum", "dram__throughput.avg.pct_of_peak_sustained_elapsed",
        "sm__throughput.avg.pct_of_peak_sustained_elapsed", "smsp__issue_active.avg.pct_of_peak_sustained_active",
        "launch__registers_per_thread", "launch__grid_size", "sm__warps_active.avg.pct_of_peak_sustained_active",
        "smsp__average_warp_latency_issue_stalled_long_scoreboard.ratio",
        "smsp__average_warp_latency_issue_stalled_barrier.ratio",
        "smsp__average_warp_latency_issue_stalled_math_pipe_throttle.ratio",
        "smsp__average_warp_latency_issue_stalled_lg_throttle.ratio",
        "smsp__average_warp_latency_issue_stalled_wait.ratio",
        "dram__bytes_read.sum", "dram__bytes_write.sum"]
short = ["kernel", "time", "dram %", "sm %", "issue %", "regs", "grid", "warps %",
         "stall mem", "stall bar", "stall math", "stall lg", "stall wait", "read", "write"]
print("| " + " | ".join(short) + " |")
print("|" + "---|" * len(short))
for r in data:
    vals = []
    for k in keys:
        try: vals.append(r[col(k)] + ("" if k == "Kernel Name" else " " + units[col(k)]).rstrip())
        except ValueError: vals.append("?")
    print("| " + " | ".join(vals) + " |")
PY
exit $rc
