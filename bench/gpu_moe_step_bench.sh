#!/usr/bin/env bash
# The whole training step of a Mixtral-shaped model on one GPU, dc against
# PyTorch in the same call: dc-gen-llama's `mixtral-1gpu` preset with
# rotary embeddings (Hugging Face MixtralForCausalLM's structure: 8 layers,
# d 2048, 8 experts top-2 of width 5632, 16/8 heads, vocab 32000; bf16;
# two sequences of 2048), compiled here by bench/pack-moe-artifacts.sh,
# trained by dc-run with and without CUDA graphs, with AdamW states in f32
# (dc-run's default: f32 master weights and moments) and in bf16 (as
# PyTorch's AdamW keeps them for bf16 parameters); then
# bench/moe_peer.py: MixtralForCausalLM of the same sizes trained by PyTorch
# eager and by torch.compile (fused AdamW). A per-op profile of dc's step
# (summed by kind of op) says where its time goes.
#
# STATES (default "f32,f32 bf16,bf16") and GRAPHS (default "0 1") pick dc's
# runs, IN_STEP=0 skips the step with its AdamW inside (bf16 state; where
# packed), PROFILE=0 skips the profile, PEER_MODES (default "eager
# compile"; empty: no peer) PyTorch's.
#
#   bash bench/gpu_moe_step_bench.sh OUT     (ART: default .gpu-artifacts/moe-step)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_moe_step_bench.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/moe-step}
RUN="stdbuf -oL -eL $BUILD/bin/dc-run --nproc 1"
RUN_TIMEOUT_S=${RUN_TIMEOUT_S:-180}
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader | tee "$OUT/machine.txt"
for state in ${STATES:-f32,f32 bf16,bf16}; do
  for g in ${GRAPHS:-0 1}; do
    graphs=""; [ "$g" = 1 ] && graphs=--cuda-graphs
    log="$OUT/dc$graphs-${state/,/-}.log"
    echo "== dc mixtral-1gpu $graphs states $state"
    # Watched: with --cuda-graphs and bf16 states dc-run printed its summary
    # and then did not exit (2026-12-07); the stacks say where it waits.
    run_watched "$log" "$RUN_TIMEOUT_S" $RUN "$ART/mixtral-1gpu-h200-w1.so" \
      --steps 8 --vocab 32000 $graphs \
      --master-dtype "${state%,*}" --moment-dtype "${state#*,}" \
      || { echo "FAILED (rc $?)"; tail -5 "$log"; continue; }
    grep -E "summary|memory reserved|^step=8" "$log"
  done
done
# The same step with its AdamW inside (bf16 state), where packed.
if [ -e "$ART/mixtral-1gpu-in-step-h200-w1.so" ] && [ "${IN_STEP:-1}" = 1 ]; then
  for g in ${GRAPHS:-0 1}; do
    graphs=""; [ "$g" = 1 ] && graphs=--cuda-graphs
    log="$OUT/dc$graphs-in-step.log"
    echo "== dc mixtral-1gpu $graphs, AdamW inside the step (bf16 state)"
    run_watched "$log" "$RUN_TIMEOUT_S" $RUN "$ART/mixtral-1gpu-in-step-h200-w1.so" \
      --steps 8 --vocab 32000 $graphs \
      || { echo "FAILED (rc $?)"; tail -5 "$log"; continue; }
    grep -E "summary|memory reserved|^step=8" "$log"
  done
fi
if [ "${PROFILE:-1}" = 1 ] && [ -e "$ART/mixtral-1gpu-h200-w1-prof.so" ]; then
  echo "== dc per-op profile"
  run_watched "$OUT/prof.log" "$RUN_TIMEOUT_S" $RUN "$ART/mixtral-1gpu-h200-w1-prof.so" \
    --steps 3 --vocab 32000 --profile-out "$OUT/profile.json" \
    && python3 bench/profile_by_kind.py "$ART/mixtral-1gpu-prof.mlir" "$OUT/profile.json" \
      | tee "$OUT/profile-by-kind.txt" \
    || { echo "profile FAILED"; tail -5 "$OUT/prof.log"; }
fi
PEER_MODES=${PEER_MODES-eager compile}
[ -n "$PEER_MODES" ] || exit 0
echo "== PyTorch: Hugging Face MixtralForCausalLM ($PEER_MODES)"
timeout 420 python3 bench/moe_peer.py --modes $PEER_MODES 2> "$OUT/peer.err" \
  | tee "$OUT/peer.jsonl" || { echo "peer FAILED"; tail -20 "$OUT/peer.err"; }
