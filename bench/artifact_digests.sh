#!/usr/bin/env bash
# Compiles the bundled example and configs A and B (the schedule, the host
# artifact and the GPU artifact) and prints one sha256 per output, so that a
# refactoring can show its artifacts are byte-identical to before:
#   bash bench/artifact_digests.sh build /tmp/before > before.txt
#   ... change the compiler, rebuild ...
#   bash bench/artifact_digests.sh build /tmp/after > after.txt; diff before.txt after.txt
# Needs a build with the CUDA toolkit found (for --target=h200).
set -euo pipefail
BIN="$(cd "${1:?usage: artifact_digests.sh BUILD_DIR OUT_DIR}" && pwd)/bin"
OUT="${2:?usage: artifact_digests.sh BUILD_DIR OUT_DIR}"
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
mkdir -p "$OUT"
# Relative paths: the reports name their input file.
cd "$OUT"

# The bundled example, as ./build.sh example runs it.
"$BIN/dc-opt" "$ROOT/examples/mlp_step.mlir" \
  --dc-zero3-pipeline="world-size=2 target=cpu memory-budget=64KiB" \
  --dc-report="trace=mlp_step.predicted.json" \
  -o "mlp_step.scheduled.mlir" > "mlp_step.report.txt"
"$BIN/dc-compile" "$ROOT/examples/mlp_step.mlir" --world-size=2 --target=cpu \
  --memory-budget=64KiB -o "mlp_step-cpu-w2.so"

# Configs A and B as the GPU benchmarks compile them; their schedules on 2
# ranks (B at FSDP2's peak, the README's budget) and A on 8 ranks at 7 GiB,
# where the planner both recomputes and offloads; their host artifacts.
"$BIN/dc-gen-llama" --config A --dtype bf16 --attention fused -o "A.mlir"
"$BIN/dc-gen-llama" --config B --dtype bf16 --attention fused -o "B.mlir"
schedule() { # name input pipeline-options budget
  "$BIN/dc-opt" "$2.mlir" --dc-zero3-pipeline="$3 memory-budget=$4" \
    --dc-report="trace=$1.predicted.json" \
    -o "$1.scheduled.mlir" > "$1.report.txt"
}
schedule A-w2 A "world-size=2" 20GiB
schedule A-w8-joint A "world-size=8 recompute=true offload-activations=true" 7GiB
schedule B-w2 B "world-size=2" 8.9GiB
for c in A B; do
  "$BIN/dc-compile" "$c.mlir" --world-size=1 --target=h200 -o "$c-h200-w1.so"
done
"$BIN/dc-compile" "A.mlir" --world-size=8 --target=cpu --memory-budget=7GiB \
  --recompute=true --offload-activations=true -o "A-cpu-w8.so"
"$BIN/dc-compile" "B.mlir" --world-size=8 --target=cpu --memory-budget=8.9GiB \
  -o "B-cpu-w8.so"
sha256sum -- *.mlir *.so *.report.txt *.predicted.json | sort -k2
