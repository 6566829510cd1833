#!/usr/bin/env bash
# Compiles the artifacts of bench/gpu_optimizer_bench.sh into
# .gpu-artifacts/optimizer (run here, where MLIR is): the tiny bf16 Llama
# (also over 4 micro-batches, and with its state in host memory) and
# configs A and B (CONFIGS, default "A"), each with dc-run's trainer AdamW
# (TRAINER=0: not) and with the update inside the step (bf16 moments and
# clipping for the tiny one, dc-run's default f32 state for A and B), and
# with the state offloaded as budgets of CUTS (e.g. "0.8 0.6") times the
# in-step peak need. JOINT=1 lets those budgets also recompute and offload
# activations (the pipeline's recompute and offload-activations), where the
# state alone cannot make the room (config A's activations).
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
GEN=${GEN:-$BIN/dc-gen-llama}
DEST=.gpu-artifacts/optimizer
mkdir -p "$DEST"
plan=()
[ "${JOINT:-0}" = 1 ] && plan=(recompute=true offload-activations=true)
"$GEN" --config tiny --batch 2 --dtype bf16 -o "$DEST/tiny-bf16.mlir"
"$BIN/dc-compile" "$DEST/tiny-bf16.mlir" --world-size=1 --target=h200 -o "$DEST/tiny-bf16-h200-w1.so"
"$BIN/dc-compile" "$DEST/tiny-bf16.mlir" --world-size=1 --target=h200 --optimizer-in-step \
  --clip-grad-norm=0.05 --moment-dtype=bf16 -o "$DEST/tiny-bf16-in-step-h200-w1.so"
# The state in host memory (pinned), uploaded for each update and written
# back.
"$BIN/dc-compile" "$DEST/tiny-bf16.mlir" --world-size=1 --target=h200 --optimizer-in-step \
  --clip-grad-norm=0.05 --moment-dtype=bf16 --offload-optimizer-state=all \
  -o "$DEST/tiny-bf16-host-state-h200-w1.so"
# Gradient accumulation over 4 micro-batches: the step's own fp32 sums.
"$BIN/dc-compile" "$DEST/tiny-bf16.mlir" --world-size=1 --target=h200 --micro-batches=4 \
  -o "$DEST/tiny-bf16-micro4-h200-w1.so"
"$BIN/dc-compile" "$DEST/tiny-bf16.mlir" --world-size=1 --target=h200 --micro-batches=4 \
  --optimizer-in-step --clip-grad-norm=0.05 --moment-dtype=bf16 \
  -o "$DEST/tiny-bf16-micro4-in-step-h200-w1.so"
for c in ${CONFIGS:-A}; do
  "$GEN" --config $c -o "$DEST/$c.mlir"
  [ "${TRAINER:-1}" = 1 ] && /usr/bin/time -f "dc-compile $c: %e s" "$BIN/dc-compile" "$DEST/$c.mlir" \
    --world-size=1 --target=h200 -o "$DEST/$c-h200-w1.so"
  /usr/bin/time -f "dc-compile $c --optimizer-in-step: %e s" "$BIN/dc-compile" "$DEST/$c.mlir" \
    --world-size=1 --target=h200 --optimizer-in-step -o "$DEST/$c-in-step-h200-w1.so"
  # The state offloaded to host memory as the budget needs, at CUTS
  # (fractions of the in-step step's planned peak; dc-report's prediction
  # beside each in $c-in-step-cutX.txt).
  peak=$("$BIN/dc-opt" "$DEST/$c.mlir" --dc-zero3-pipeline="world-size=1 target=h200 optimizer-in-step=true" \
    --dc-report -o /dev/null | sed -n 's/.*peak device memory *[^(]*(\([0-9]*\) B).*/\1/p' | head -1)
  for cut in ${CUTS:-}; do
    budget=$(python3 -c "print(int($peak * $cut))")
    # A budget no plan reaches is refused with its reason (kept in the
    # .txt, as the benchmark's answer for that cut).
    "$BIN/dc-opt" "$DEST/$c.mlir" --dc-zero3-pipeline="world-size=1 target=h200 optimizer-in-step=true \
      offload-optimizer-state=budget memory-budget=$budget ${plan[*]}" --dc-report -o /dev/null \
      > "$DEST/$c-in-step-cut$cut.txt" 2>&1 \
      || { echo "$c at $cut x $peak B refused:"; grep error: "$DEST/$c-in-step-cut$cut.txt"; continue; }
    /usr/bin/time -f "dc-compile $c, state offload at $cut x $peak B: %e s" "$BIN/dc-compile" "$DEST/$c.mlir" \
      --world-size=1 --target=h200 --optimizer-in-step --offload-optimizer-state=budget \
      --memory-budget=$budget ${plan[@]/#/--} -o "$DEST/$c-in-step-cut$cut-h200-w1.so"
  done
done
rm -f "$DEST"/*.mlir
du -sh "$DEST"
