#!/usr/bin/env bash
# The optimizer inside the step (issue 53) on one GPU: the same steps with
# dc-run's trainer AdamW after the step and with the update compiled into
# it (dc-compile --optimizer-in-step), one call.
#
#   ART=.gpu-artifacts/optimizer BUILD=build-gpu bash bench/gpu_optimizer_bench.sh OUT
#
# Checks: the tiny bf16 Llama (fp32 master, bf16 moments, clipping) trains
# 20 steps with the compiled update as with the trainer's (losses and norms
# bit for bit, eager and with CUDA graphs; the final checkpoints compared),
# and config A/B (where packed) step times, the two side by side, with CUDA
# graphs; the tiny step over 4 micro-batches (the step's fp32 sums against
# the trainer's), bit for bit. Pack with bench/pack-optimizer-artifacts.sh.
# MEMCHECK=1 also runs 2 steps of 4 micro-batches of the tiny step with its
# AdamW under compute-sanitizer memcheck and racecheck.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_optimizer_bench.sh OUT}
mkdir -p "$OUT"
ART=${ART:-.gpu-artifacts/optimizer}
BIN=${BUILD:-build-gpu}/bin
export NCCL_NVLS_ENABLE=0 DCRT_TIMEOUT_S=${DCRT_TIMEOUT_S:-60}
status=0
fail() { echo "FAILED: $*"; status=1; }

# same_training WHAT A B: the runs whose logs are $OUT/A.log and $OUT/B.log
# trained alike: the same losses and gradient norms, bit for bit, and
# byte-identical final checkpoints ($OUT/A.safetensors, $OUT/B.safetensors).
same_training() {
  local what=$1 a=$OUT/$2 b=$OUT/$3 field
  for field in loss grad_norm; do
    python3 test/Runtime/Inputs/losses.py --rtol 0 --field $field "$a.log" "$b.log" \
      || fail "$what: the $field differs"
  done
  if cmp -s "$a.safetensors" "$b.safetensors"; then
    echo "checkpoints, $what: identical"
  else
    python3 test/Runtime/Inputs/safetensors_tool.py close "$a.safetensors" "$b.safetensors" 1e-2 \
      | tail -3
    fail "checkpoints differ ($what)"
  fi
}

# run NAME ARTIFACT OPTIONS...: dc-run into $OUT/NAME.log, saving
# $OUT/NAME.safetensors.
run() {
  local name=$1 artifact=$2
  shift 2
  "$BIN/dc-run" "$ART/$artifact" "$@" --save "$OUT/$name.safetensors" > "$OUT/$name.log" 2>&1 \
    || { tail -5 "$OUT/$name.log"; fail "$name"; }
}

if [ -f "$ART/tiny-bf16-h200-w1.so" ]; then
  echo "== tiny bf16: 20 steps, trainer AdamW vs the step's own (clip 0.05, bf16 moments)"
  common="--steps 20 --vocab 32 --lr 0.01"
  for graphs in "" --cuda-graphs; do
    tag=${graphs:+-graphs}
    run tiny-trainer$tag tiny-bf16-h200-w1.so $common $graphs --clip-grad-norm 0.05 \
      --moment-dtype bf16
    run tiny-in-step$tag tiny-bf16-in-step-h200-w1.so $common $graphs
    same_training "the step's AdamW$tag" tiny-trainer$tag tiny-in-step$tag
    grep "step=20" "$OUT/tiny-trainer$tag.log" "$OUT/tiny-in-step$tag.log"
  done
fi

if [ -f "$ART/tiny-bf16-host-state-h200-w1.so" ]; then
  echo "== tiny bf16: the step's AdamW with its state in host memory vs the trainer's"
  run tiny-host-state tiny-bf16-host-state-h200-w1.so --steps 20 --vocab 32 --lr 0.01 --cuda-graphs
  same_training "state in host memory" tiny-trainer-graphs tiny-host-state
fi

if [ -f "$ART/tiny-bf16-micro4-in-step-h200-w1.so" ]; then
  echo "== tiny bf16, 4 micro-batches: the trainer's fp32 sums and AdamW vs the step's own"
  common="--steps 12 --vocab 32 --lr 0.01 --cuda-graphs"
  run micro4-trainer tiny-bf16-micro4-h200-w1.so $common --micro-batches 4 --clip-grad-norm 0.05 \
    --moment-dtype bf16
  run micro4-in-step tiny-bf16-micro4-in-step-h200-w1.so $common
  same_training "4 micro-batches" micro4-trainer micro4-in-step
fi

# API errors are not reported (NCCL probes kernel images of other GPUs at
# start-up and handles the error); RACECHECK=0 skips racecheck.
if [ "${MEMCHECK:-0}" = 1 ] && [ -f "$ART/tiny-bf16-in-step-h200-w1.so" ]; then
  tools=memcheck
  [ "${RACECHECK:-1}" = 1 ] && tools="memcheck racecheck"
  for tool in $tools; do
    echo "== compute-sanitizer $tool: 2 steps (4 micro-batches) of the tiny step with its AdamW"
    compute-sanitizer --tool $tool --report-api-errors no --error-exitcode 1 "$BIN/dc-run" \
      "$ART/tiny-bf16-micro4-in-step-h200-w1.so" --steps 2 --vocab 32 \
      > "$OUT/sanitizer-$tool.log" 2>&1 || { tail -20 "$OUT/sanitizer-$tool.log"; fail "$tool"; }
    grep -E "ERROR SUMMARY|RACECHECK SUMMARY" "$OUT/sanitizer-$tool.log"
  done
fi

# Configs A and B: the trainer's AdamW, the step's, and the step's with
# its state offloaded under each packed budget (whose losses and norms must
# be the unconstrained step's: the same arithmetic, other memory).
for c in A B; do
  [ -f "$ART/$c-in-step-h200-w1.so" ] || continue
  echo "== config $c, 1 GPU, ${BIG_STEPS:-12} steps with CUDA graphs"
  for form in "" -in-step $(cd "$ART" && ls $c-in-step-cut*-h200-w1.so 2> /dev/null \
                             | sed "s/^$c//; s/-h200-w1.so$//"); do
    [ -f "$ART/$c$form-h200-w1.so" ] || continue
    "$BIN/dc-run" "$ART/$c$form-h200-w1.so" --steps ${BIG_STEPS:-12} --cuda-graphs \
      > "$OUT/$c$form.log" 2>&1 || { tail -5 "$OUT/$c$form.log"; fail "config $c$form"; continue; }
    echo "$c${form:- (trainer AdamW)}: $(grep -E '^dc-run: start-up' "$OUT/$c$form.log")"
    grep -E "^summary" "$OUT/$c$form.log"
    grep "step=${BIG_STEPS:-12} " "$OUT/$c$form.log"
    if [ "${form#-in-step-cut}" != "$form" ]; then
      for field in loss grad_norm; do
        python3 test/Runtime/Inputs/losses.py --rtol 0 --field $field \
          "$OUT/$c-in-step.log" "$OUT/$c$form.log" \
          || fail "config $c$form differs from the unconstrained step ($field)"
      done
    fi
  done
done
exit $status
