#!/usr/bin/env bash
# Every measurement the GPU lowering reports (docs/performance.md), on one
# GPU, in as few device calls as the 10-minute limit allows. PARTS picks
# the parts (default all four, in this order), each bounded by its own
# timeout so a slow part still leaves the others' logs:
#
#   tests  runtime/test/gpu/run.sh: collectives, AdamW, GEMM and attention
#          checks against references (with TFLOP/s beside torch.matmul and
#          PyTorch's flash SDPA), compiled steps against the host, memcheck
#   steps  bench/gpu_step_bench.sh on A16 and B with CUDA graphs and bf16
#          AdamW state: step times, per-op profiles by kind, the generated
#          kernels beside Inductor and torch.matmul, each op's bandwidth
#          against a copy of its own bytes
#   ncu    bench/gpu_inductor_ncu.sh: kernel durations beside Inductor's
#          under Nsight Compute (clocks as a step runs them)
#   peer   PyTorch's replicated step under torch.compile on this GPU (the
#          whole-step peer), configs A and B
#
# Needs .gpu-artifacts (BENCH=1 runtime/test/gpu/pack-artifacts.sh) and
# .gpu-deps (runtime/test/gpu/pack-deps.sh) carried.
#
#   [PARTS="tests steps"] bash bench/gpu_lowering_suite.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_lowering_suite.sh OUT}
mkdir -p "$OUT"
export NCCL_NVLS_ENABLE=0
nvidia-smi --query-gpu=name,memory.total,driver_version,clocks.max.sm --format=csv \
  | tee "$OUT/machine.txt"
status=0
part() {
  local name=$1 limit=$2
  shift 2
  echo; echo "==== $name (at most $limit s)"
  local start=$SECONDS
  timeout "$limit" "$@" > "$OUT/$name.log" 2>&1 || { echo "$name: rc $?"; status=1; }
  echo "$name: $((SECONDS - start)) s"
}
for p in ${PARTS:-tests steps ncu peer}; do
  case $p in
    tests)
      part tests "${TESTS_S:-300}" bash runtime/test/gpu/run.sh "$OUT/tests"
      grep -E "^==|FAILED|^ok|TFLOP|loss|errors" "$OUT/tests.log" | tail -60 ;;
    steps)
      part steps "${STEPS_S:-300}" env STATES=bf16,bf16 GRAPHS=1 \
        bash bench/gpu_step_bench.sh "$OUT/steps"
      tail -60 "$OUT/steps.log" ;;
    ncu)
      part ncu "${NCU_S:-240}" env CLOCKS=none bash bench/gpu_inductor_ncu.sh "$OUT/ncu"
      tail -14 "$OUT/ncu.log" ;;
    peer)
      for c in A B; do
        part "peer-$c" "${PEER_S:-240}" torchrun --standalone --nproc-per-node 1 \
          bench/peer_torch.py --config "$c" --mode replicated --compile \
          --json-out "$OUT/peer-$c.json"
        tail -4 "$OUT/peer-$c.log"
      done ;;
    *) echo "unknown part $p"; status=1 ;;
  esac
done
exit $status
