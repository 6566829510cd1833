#!/usr/bin/env bash
# Compiles dc's side of the FSDP2 comparison here (the GPU machine has no
# MLIR): configs A (16 layers) and B of ../shared/BENCHMARKS.md sharded over
# 2 ranks for the h200 target, at the budgets the comparison asks for, each
# with dc-report's prediction (JSON: step time, exposed communication,
# planned peak) and predicted Chrome trace beside it. bench/dc_vs_fsdp2.sh
# runs them on the GPUs.
#
#   bash bench/dc_vs_fsdp2_pack.sh [CONFIG=PEAK ...] [--profile CONFIG=FILE ...]
#
# CONFIG=PEAK (e.g. A16=20.5GiB B=16.2GiB): the best FSDP2 variant's measured
# peak for that config. Each config is compiled
#   plain   with the whole device as budget,
#   fit     at PEAK,
#   tight   at 0.6 x PEAK,
#   offload at 0.8 x PEAK,
# each offloading activations where the plan needs it (prefetch and
# selective gather spend what is left),
# and without a PEAK only plain. --profile CONFIG=FILE (dc-run
# --profile-out of that config's -prof artifact) adds `plain-pgo`, the plain
# schedule re-planned with measured op times. Every config also gets a
# `-prof` artifact (per-op events) for the first profile.
# Output: .gpu-artifacts/fsdp2/ (carry .gpu-artifacts to the GPU machine).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BUILD_DIR:-build}/bin
DEST=.gpu-artifacts/fsdp2
WORLD=2
declare -A PEAK PROFILE
while [ $# -gt 0 ]; do
  case "$1" in
    --profile) PROFILE[${2%%=*}]=${2#*=}; shift ;;
    *=*) PEAK[${1%%=*}]=${1#*=} ;;
    *) echo "usage: $0 [CONFIG=PEAK ...] [--profile CONFIG=FILE ...]" >&2; exit 2 ;;
  esac
  shift
done
mkdir -p "$DEST"
gen() {
  case "$1" in
    A16) "$BIN/dc-gen-llama" --config A --dtype bf16 --attention fused -o "$2" ;;
    B) "$BIN/dc-gen-llama" --config B --dtype bf16 --attention fused -o "$2" ;;
  esac
}
# Bytes of "14.2GiB" and the like, times a factor, as whole bytes.
scaled() {
  python3 - "$1" "$2" <<'PY'
import re, sys
m = re.fullmatch(r"([0-9.]+)\s*(GiB|MiB|KiB|GB|MB|B)?", sys.argv[1])
unit = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10, "GB": 1e9, "MB": 1e6, "B": 1, None: 1}[m.group(2)]
print(int(float(m.group(1)) * unit * float(sys.argv[2])))
PY
}
# compile CONFIG VARIANT OPTIONS...: the artifact, its report and trace.
compile() {
  local c=$1 v=$2; shift 2
  local out="$DEST/$c-w$WORLD-$v"
  local pipeline="world-size=$WORLD target=h200 optimizer-state-bytes=12"
  local opt
  for opt in "$@"; do pipeline+=" ${opt#--}"; done
  local report=${pipeline/world-size=$WORLD /}
  # The pipeline attached the target and budget; the report reads them there.
  report=$(tr ' ' '\n' <<< "$report" | grep -E '^(profile|optimizer-state-bytes)=' | tr '\n' ' ')
  # A budget the step cannot meet is a result too: dc-compile says why.
  /usr/bin/time -f "dc-compile $c $v: %e s, %M KB" \
    "$BIN/dc-compile" "$DEST/$c.mlir" --world-size=$WORLD --target=h200 "$@" -o "$out.so" \
    2> "$out.compile.log" || { tail -4 "$out.compile.log"; echo "$c $v: not compiled"; return 0; }
  tail -1 "$out.compile.log"
  "$BIN/dc-opt" "$DEST/$c.mlir" --dc-zero3-pipeline="$pipeline" \
    --dc-report="$report json=true output=$out.report.json trace=$out.predicted.json" -o /dev/null
  python3 - "$out.report.json" "$c $v" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))[0]
print("%-12s predicted %.2f ms (exposed collectives %.2f ms, copies %.2f ms), planned peak %.2f GiB (step %.2f + state %.2f) of budget %.2f GiB" % (
    sys.argv[2], r["stepSeconds"] * 1e3, r["exposedCollectiveSeconds"] * 1e3, r["exposedCopySeconds"] * 1e3,
    (r["peakDeviceBytes"] + r["trainerStateBytes"]) / 2**30, r["peakDeviceBytes"] / 2**30,
    r["trainerStateBytes"] / 2**30, r["budgetBytes"] / 2**30))
PY
}
for c in A16 B; do
  gen $c "$DEST/$c.mlir"
  compile $c plain
  "$BIN/dc-compile" "$DEST/$c.mlir" --world-size=$WORLD --target=h200 --profile-ops \
    -o "$DEST/$c-w$WORLD-prof.so"
  if [ -n "${PEAK[$c]:-}" ]; then
    compile $c fit --memory-budget="$(scaled "${PEAK[$c]}" 1)" --offload-activations
    compile $c tight --memory-budget="$(scaled "${PEAK[$c]}" 0.6)" --offload-activations
    compile $c offload --memory-budget="$(scaled "${PEAK[$c]}" 0.8)" --offload-activations
  fi
  if [ -n "${PROFILE[$c]:-}" ]; then
    compile $c plain-pgo --profile="${PROFILE[$c]}"
  fi
  rm -f "$DEST/$c.mlir"
done
ls -la "$DEST" | tail -n +2
echo "packed $(du -sh "$DEST" | cut -f1) into $DEST"
