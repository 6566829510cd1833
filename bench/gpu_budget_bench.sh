#!/usr/bin/env bash
# On a GPU machine: the steps bench/pack-budget-artifacts.sh compiled (config
# A on one H200 at 20-40% under its no-offload step peak: offload only,
# recompute only, both) timed by dc-run, beside dc-report's prediction:
# trainer step (the step, then AdamW) and peak memory, measured against
# predicted, and the overhead over the unconstrained step. Needs the
# runtime-only build runtime/test/gpu/run.sh makes (built here if absent).
# DETERMINISTIC=1 runs every step with dc-run --deterministic (cuDNN's
# attention backward without atomics) and the unbudgeted step twice, so the
# bit-for-bit comparison below means something on the GPU. DCRUN_ARGS adds
# dc-run flags to every run (--cuda-graphs). STEPS (default 12) steps a
# run; the table takes the median of steps 4 to the last (A's single steps
# vary by +-3%: the medians of 9 steps hold the overheads to about +-0.5%).
# ONLY="none joint-40 ..." runs just those artifacts; ROUNDS=K runs them all
# K times in turn (NAME.rK.log), so that a plan is compared with the
# unbudgeted step of its own round on the same machine start; TRACE=1 has
# dc-run write NAME.trace.json, whose reload copies give the link's rate
# in the table (one slow machine start tells apart from a slow plan).
#
#   [DETERMINISTIC=1] [STEPS=N] [ONLY=...] [ROUNDS=K] [TRACE=1] [DCRUN_ARGS=...] \
#     bash bench/gpu_budget_bench.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_budget_bench.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/budget}
extra=()
[ "${DETERMINISTIC:-0}" = 1 ] && extra=(--deterministic)
# DCRUN_ARGS: more dc-run flags for every step (e.g. --cuda-graphs).
# shellcheck disable=SC2206
extra+=(${DCRUN_ARGS:-})
run_step() { # SO NAME
  echo "== $2 ${extra[*]}"
  local trace=()
  [ "${TRACE:-0}" = 1 ] && trace=(--trace "$OUT/$2.trace.json")
  timeout "${RUN_TIMEOUT_S:-150}" stdbuf -oL -eL "$BUILD/bin/dc-run" --nproc 1 "$1" --steps "${STEPS:-12}" \
    --vocab 32000 "${extra[@]}" "${trace[@]}" > "$OUT/$2.log" 2>&1 || { echo "FAILED (rc $?)"; tail -5 "$OUT/$2.log"; }
  grep -E "^step=" "$OUT/$2.log" | tail -1
}
names=()
for so in "$ART"/*.so; do names+=("$(basename "$so" .so)"); done
# shellcheck disable=SC2206
[ -n "${ONLY:-}" ] && names=(${ONLY})
for round in $(seq 1 "${ROUNDS:-1}"); do
  suffix=""
  [ "$round" -gt 1 ] && suffix=".r$round"
  for name in "${names[@]}"; do
    run_step "$ART/$name.so" "$name$suffix"
  done
done
[ "${DETERMINISTIC:-0}" = 1 ] && run_step "$ART/none.so" none-again
python3 bench/budget_table.py "$ART" "$OUT" | tee "$OUT/budget-table.md"
# Offload and recomputation move or recompute the same values: each
# budgeted plan must train with the unbudgeted step's losses and gradient
# norms, bit for bit (the issue asks exact recomputation).
shopt -s nullglob
again=()
[ "${DETERMINISTIC:-0}" = 1 ] && again=("$OUT"/none-again.log "$OUT"/none.r[0-9]*.log)
# A plan with its loss head in chunks of rows (-rowsN) sums the loss and
# the head's bf16 weight gradient chunk by chunk: on the GPU that rounds
# differently from the whole head (on the host it is bit-identical,
# row-chunks-exact.test), so it is held to ROWS_RTOL instead.
for log in "$OUT"/*-[0-9]*.log "${again[@]}"; do
  rtol=0 what="bit-identical to"
  case $(basename "$log") in *-rows[0-9]*) rtol=${ROWS_RTOL:-1e-2} what="within $rtol of";; esac
  for field in loss grad_norm; do
    agree=$(python3 test/Runtime/Inputs/losses.py --rtol "$rtol" --field $field "$OUT/none.log" "$log" 2>&1) \
      && echo "$(basename "$log" .log): $field $what none (${agree##*(}" \
      || echo "$(basename "$log" .log): $field DIFFERS from none: $(python3 test/Runtime/Inputs/losses.py \
           --rtol 1 --field $field "$OUT/none.log" "$log" 2>&1 | tail -1)"
  done
done
