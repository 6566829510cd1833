#!/usr/bin/env bash
# Config A (16 layers, bf16, fused attention) on one GPU under a smaller
# device-memory budget: 20, 30 and 40% under its no-offload step peak, each
# planned three ways (offload only, recompute only, both: the pipeline's
# offload-activations / recompute options), compiled --target=h200 into
# DEST (default .gpu-artifacts/budget) with dc-report's prediction beside
# each (NAME-report.txt). bench/gpu_budget_bench.sh runs them on the GPU.
# The budget counts the fp32 AdamW state (12 B per parameter element) as
# dc-compile does: budget = (1 - cut) x step peak + state.
# PLANS (default "offload recompute joint") picks the plans; joint-typical
# is the joint plan with its copies planned at the link's typical rate
# (a JSON target: h200 with hostLinkPlanningBandwidth 0) instead of the
# preset's margin under it, to measure what the margin buys; joint-linkN
# plans the copies at N GB/s; any plan with -rowsN (joint-rows4) computes
# the loss head in N chunks of rows (row-chunks=N).
#
#   [CUTS="20 30 40"] [PLANS=...] bash bench/pack-budget-artifacts.sh [DEST]   (after ./build.sh)
set -euo pipefail
cd "$(dirname "$0")/.."
DEST=${1:-.gpu-artifacts/budget}
BIN=${BUILD_DIR:-build}/bin
rm -rf "$DEST"
mkdir -p "$DEST"
"$BIN/dc-gen-llama" --config A --dtype bf16 --attention fused -o "$DEST/A16.mlir"
echo '{"base": "h200", "hostLinkPlanningBandwidth": 0}' > "$DEST/h200-typical-link.json"
report() { # NAME PIPELINE-OPTIONS [REPORT-OPTIONS [TARGET]]
  "$BIN/dc-opt" "$DEST/A16.mlir" \
    --dc-zero3-pipeline="world-size=1 target=${4:-h200} optimizer-state-bytes=12 $2" \
    --dc-attach-target=target=h200 \
    --dc-report="optimizer-state-bytes=12 ${3:-}" -o /dev/null > "$DEST/$1-report.txt"
}
# The device pools an artifact's manifest plans (gather arena + step arena +
# step buffers + staging; the host pool apart), from the JSON in the .so, in
# NAME-plan.txt: with reloads in the step arena their sum should not exceed
# the step peak dc-report planned (gpu_budget_bench.sh measures the pools).
plan() { # NAME
  local json
  json=$(grep -ao '"plan":{[^}]*}' "$DEST/$1.so" | head -1)
  [ -n "$json" ] || { echo "no manifest plan in $DEST/$1.so"; exit 1; }
  python3 - "$json" "$DEST/$1-report.txt" > "$DEST/$1-plan.txt" <<'PY'
import json, re, sys
plan = json.loads("{" + sys.argv[1] + "}")["plan"]
device = sum(plan.get(k, 0) for k in ("gather_arena_bytes", "step_arena_bytes",
                                      "step_buffer_bytes", "staging_bytes"))
step = re.search(r"\(step [^(]*\((\d+) B\)", open(sys.argv[2]).read())
print(" ".join(f"{k}={v}" for k, v in plan.items()))
print(f"device pools {device} B ({device / 2**30:.2f} GiB)" +
      (f", planned step {step.group(1)} B ({int(step.group(1)) / 2**30:.2f} GiB)"
       if step else ""))
PY
  echo "$1: $(tail -1 "$DEST/$1-plan.txt")"
}
report none ""
# "peak device memory  25.53 GiB (N B) (step 14.88 GiB (S B) + optimizer state 10.65 GiB (T B))"
read -r step state < <(sed -n 's/.*(step [^(]*(\([0-9]*\) B) + optimizer state [^(]*(\([0-9]*\) B)).*/\1 \2/p' "$DEST/none-report.txt")
[ -n "$step" ] || { echo "no step peak in $DEST/none-report.txt"; exit 1; }
echo "no-offload step peak $step B, optimizer state $state B"
/usr/bin/time -f "dc-compile none: %e s" "$BIN/dc-compile" "$DEST/A16.mlir" --world-size=1 \
  --target=h200 -o "$DEST/none.so"
plan none
for cut in ${CUTS:-20 30 40}; do
  budget=$(( step * (100 - cut) / 100 + state ))
  for plan in ${PLANS:-offload recompute joint}; do
    target=h200
    # PLAN-rowsN: PLAN with the loss head in N chunks of rows (row-chunks=N).
    rows=""
    case $plan in *-rows[0-9]*) rows="row-chunks=${plan##*-rows}";; esac
    case ${plan%-rows[0-9]*} in
      offload) opts="offload-activations=true";;
      recompute) opts="recompute=true";;
      joint) opts="recompute=true offload-activations=true";;
      joint-typical) opts="recompute=true offload-activations=true"
        target=$DEST/h200-typical-link.json;;
      joint-link[0-9]*) opts="recompute=true offload-activations=true"
        target=$DEST/h200-$plan.json
        echo "{\"base\": \"h200\", \"hostLinkPlanningBandwidth\": ${plan#joint-link}e9}" > "$target";;
      *) echo "unknown plan $plan"; exit 1;;
    esac
    opts="$opts $rows"
    name=$plan-$cut
    # Predicted on the h200 preset (the typical rate) whatever it was planned on.
    report "$name" "memory-budget=$budget $opts" "memory-budget=$budget" "$target"
    args=()
    for o in $opts; do args+=("--$o"); done
    /usr/bin/time -f "dc-compile $name: %e s" "$BIN/dc-compile" "$DEST/A16.mlir" --world-size=1 \
      --target="$target" --memory-budget=$budget "${args[@]}" -o "$DEST/$name.so"
    plan "$name"
  done
done
