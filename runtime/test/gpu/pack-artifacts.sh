#!/usr/bin/env bash
# Compiles the steps the GPU tests run (the GPU machine has no MLIR): each
# model for the host (--target=cpu codegen, the reference) and for the GPU
# (--target=h200), for 1 and 2 ranks, into DEST (default .gpu-artifacts at
# the repo root; carry it to the GPU machine). With BENCH=1 also configs A
# (16 layers) and B for bench/gpu_step_bench.sh, timing dc-compile.
#
#   [BENCH=1] bash runtime/test/gpu/pack-artifacts.sh [DEST]   (after ./build.sh)
set -euo pipefail
cd "$(dirname "$0")/../../.."
DEST=${1:-.gpu-artifacts}
BIN=${BUILD_DIR:-build}/bin
rm -rf "$DEST"
mkdir -p "$DEST"
models() {
  "$BIN/dc-gen-llama" --config tiny -o "$DEST/tiny-f32.mlir"
  "$BIN/dc-gen-llama" --config tiny --dtype bf16 -o "$DEST/tiny-bf16.mlir"
  "$BIN/dc-gen-llama" --config tiny --attention fused -o "$DEST/tiny-fused.mlir"
  # Bigger than tiny, small enough to train 20 steps in seconds: the
  # matmuls take cuBLASLt's real paths, rows span many threads.
  "$BIN/dc-gen-llama" --layers 2 --dim 256 --ffn 512 --heads 4 --vocab 1024 \
    --batch 2 --seq 128 --dtype bf16 -o "$DEST/small-bf16.mlir"
  # The same with fused attention: bf16 calls cuDNN's flash attention on
  # the GPU (head_dim 64), the host expands it.
  "$BIN/dc-gen-llama" --layers 2 --dim 256 --ffn 512 --heads 4 --vocab 1024 \
    --batch 2 --seq 128 --dtype bf16 --attention fused -o "$DEST/small-fused-bf16.mlir"
  # 2048 tokens, the embedding gradient split into row groups, attention
  # over 1024 positions.
  "$BIN/dc-gen-llama" --layers 1 --dim 256 --ffn 512 --heads 4 --vocab 1024 \
    --batch 2 --seq 1024 --dtype bf16 --attention fused -o "$DEST/tall-fused-bf16.mlir"
  # A vocabulary of 10000: cross-entropy's rows (1250 16-byte chunks) loop
  # with the online softmax's clamped last chunks, as configs A and B do.
  "$BIN/dc-gen-llama" --layers 1 --dim 128 --ffn 256 --heads 2 --vocab 10000 \
    --batch 2 --seq 64 --dtype bf16 --attention fused -o "$DEST/wide-vocab-bf16.mlir"
  # Rows of 2048 (config A's width): the norms' row groups are a block per
  # row with values kept between members, the final norm's weight gradient
  # folded into its backward's row group.
  "$BIN/dc-gen-llama" --layers 1 --dim 2048 --ffn 256 --heads 16 --vocab 1024 \
    --batch 1 --seq 64 --dtype bf16 --attention fused -o "$DEST/wide-dim-bf16.mlir"
  # Rotary embeddings (tables computed in the step, each half reading its
  # partner): f32 on tiny; bf16 with grouped-query heads (4 query, 2
  # key/value heads of 64) and the fused attention.
  "$BIN/dc-gen-llama" --config tiny --rotary -o "$DEST/tiny-rotary.mlir"
  "$BIN/dc-gen-llama" --layers 2 --dim 256 --ffn 512 --heads 4 --kv-heads 2 --vocab 1024 \
    --batch 2 --seq 128 --dtype bf16 --attention fused --rotary -o "$DEST/small-rotary-bf16.mlir"
}
models
# PACK_MODELS: the models to compile (default all), PACK_RANKS their rank
# counts (default 1 2): a shorter run.sh (COMPILED_MODELS) needs fewer.
for model in ${PACK_MODELS:-tiny-f32 tiny-bf16 tiny-fused small-bf16 small-fused-bf16 tall-fused-bf16 \
             wide-vocab-bf16 wide-dim-bf16 tiny-rotary small-rotary-bf16}; do
  for w in ${PACK_RANKS:-1 2}; do
    "$BIN/dc-compile" "$DEST/$model.mlir" --world-size=$w --lowering=host -o "$DEST/$model-cpu-w$w.so"
    "$BIN/dc-compile" "$DEST/$model.mlir" --world-size=$w --target=h200 -o "$DEST/$model-h200-w$w.so"
  done
done
# With --finishing-passes (the norms' weight-gradient sums at the end of
# their row groups' kernels), against wide-dim-bf16-cpu-w1.so.
[ -n "${PACK_MODELS:-}" ] || "$BIN/dc-compile" "$DEST/wide-dim-bf16.mlir" --world-size=1 \
  --target=h200 --finishing-passes -o "$DEST/wide-dim-finishing-bf16-h200-w1.so"
# The loss head in 4 chunks of rows (dc-chunk-rows; min-bytes 0, as these
# heads are small): slices of the logits, the head's weight gradient and
# the loss accumulated chunk after chunk, on the GPU as on the host.
for model in ${PACK_MODELS-tiny-f32 wide-vocab-bf16}; do
  case $model in tiny-f32|wide-vocab-bf16) ;; *) continue;; esac
  chunked=${model%-*}-rows4-${model##*-}
  for w in ${PACK_RANKS:-1 2}; do
    for target in cpu h200; do
      "$BIN/dc-compile" "$DEST/$model.mlir" --world-size=$w --target=$target --row-chunks=4 \
        --row-chunks-min-bytes=0 -o "$DEST/$chunked-$target-w$w.so"
    done
  done
done
# Finite-value checks (dc-compile --check-finite): a step that makes a NaN
# (test/Frontend/Inputs/bad_models.py:planted_nan), which run.sh trains
# with dc-run --check-finite to see the op and source line named; and two
# layers of config A with and without the checks, whose step times
# bench/gpu_check_finite.sh compares.
if /usr/bin/python3 -c "import torch" 2> /dev/null; then
  mkdir -p "$DEST/check-finite"
  dest=$(cd "$DEST" && pwd)
  (cd test/Frontend/Inputs && PYTHONPATH=../../../python /usr/bin/python3 -m dc_torch export \
    bad_models:planted_nan --batch 2 --seq 5 -o "$dest/planted-nan.mlir" \
    --weights "$dest/check-finite/planted-nan.safetensors")
  "$BIN/dc-compile" "$DEST/planted-nan.mlir" --world-size=1 --target=h200 --check-finite \
    -o "$DEST/check-finite/planted-nan-h200-w1.so"
  "$BIN/dc-gen-llama" --config A --layers 2 --dtype bf16 --attention fused -o "$DEST/A2.mlir"
  "$BIN/dc-compile" "$DEST/A2.mlir" --world-size=1 --target=h200 -o "$DEST/check-finite/A2-h200-w1.so"
  "$BIN/dc-compile" "$DEST/A2.mlir" --world-size=1 --target=h200 --check-finite \
    -o "$DEST/check-finite/A2-checked-h200-w1.so"
fi
# The model suite's families written in plain PyTorch (test/Frontend/
# Inputs/families.py: the Hugging Face structures, which torch 1.13 traces
# here), exported with their weights and PyTorch's f32 losses, compiled
# for one GPU and 2 host ranks: run.sh trains them (bench/gpu_hf_bench.sh).
# The transformers families need the GPU machine's torch to export:
# bench/hf_frontend.py export there, bench/pack-hf-artifacts.sh here.
# SUITE=0 leaves them out (a run.sh call without the model suite).
if [ "${SUITE:-1}" = 0 ]; then
  echo "SUITE=0: the plain-PyTorch families are not packed"
elif /usr/bin/python3 -c "import torch" 2> /dev/null; then
  /usr/bin/python3 bench/hf_frontend.py export "$DEST/families-src" --plain --steps 20
  bash bench/pack-hf-artifacts.sh "$DEST/families-src" "$DEST/families"
  rm -rf "$DEST/families-src"
else
  echo "no python3 with torch: the plain-PyTorch families are not packed"
fi
if [ "${BENCH:-0}" = 1 ]; then
  mkdir -p "$DEST/bench"
  "$BIN/dc-gen-llama" --config A --dtype bf16 --attention fused -o "$DEST/A16.mlir"
  "$BIN/dc-gen-llama" --config B --dtype bf16 --attention fused -o "$DEST/B.mlir"
  for c in A16 B; do
    /usr/bin/time -f "dc-compile --target=h200 $c: %e s, %M KB" \
      "$BIN/dc-compile" "$DEST/$c.mlir" --world-size=1 --target=h200 -o "$DEST/bench/$c-h200-w1.so"
    # With --finishing-passes: CONFIGS="A16-finishing B-finishing" in
    # bench/gpu_step_bench.sh.
    "$BIN/dc-compile" "$DEST/$c.mlir" --world-size=1 --target=h200 --finishing-passes \
      -o "$DEST/bench/$c-finishing-h200-w1.so"
  done
  # Two layers of A with rotary embeddings, profiled only: the rotations'
  # kernels for bench/kernel_table.py (the reference configs have none).
  "$BIN/dc-gen-llama" --config A --layers 2 --rotary --dtype bf16 --attention fused \
    -o "$DEST/A2R.mlir"
  "$BIN/dc-compile" "$DEST/A2R.mlir" --world-size=1 --target=h200 --profile-ops \
    --mlir-print-ir-before=dc-profile-ops --mlir-elide-elementsattrs-if-larger=16 \
    -o "$DEST/bench/A2R-h200-w1-prof.so" 2> "$DEST/bench/A2R-h200-w1-prof.mlir"
  # Which op each of its kernels computes, for bench/gpu_inductor_ncu.sh.
  "$BIN/dc-compile" "$DEST/A2R.mlir" --world-size=1 --target=h200 --profile-ops \
    --mlir-print-ir-after=dc-merge-kernel-modules --mlir-print-debuginfo \
    -o "$DEST/A2R-names.so" 2> "$DEST/A2R-kernels.mlir"
  python3 bench/kernel_names.py "$DEST/A2R-kernels.mlir" > "$DEST/bench/A2R-kernels.json"
  # The same with --finishing-passes, the last 64 (default), 128, 32 or 16
  # blocks sharing the second pass: VARIANTS="finishing finishing128
  # finishing32 finishing16" in bench/gpu_inductor_ncu.sh.
  # And block reductions with one barrier: VARIANTS="single
  # single-finishing".
  for variant in "finishing:--finishing-passes --finishing-blocks=64" \
    "finishing128:--finishing-passes --finishing-blocks=128" \
    "finishing32:--finishing-passes --finishing-blocks=32" \
    "finishing16:--finishing-passes --finishing-blocks=16" \
    "single:--single-barrier-reductions" \
    "single-finishing:--single-barrier-reductions --finishing-passes"; do
    name=${variant%%:*}
    flags=${variant#*:}
    "$BIN/dc-compile" "$DEST/A2R.mlir" --world-size=1 --target=h200 --profile-ops $flags \
      -o "$DEST/bench/A2R-$name-h200-w1-prof.so"
    "$BIN/dc-compile" "$DEST/A2R.mlir" --world-size=1 --target=h200 --profile-ops $flags \
      --mlir-print-ir-after=dc-merge-kernel-modules --mlir-print-debuginfo \
      -o "$DEST/A2R-names.so" 2> "$DEST/A2R-kernels.mlir"
    python3 bench/kernel_names.py "$DEST/A2R-kernels.mlir" > "$DEST/bench/A2R-$name-kernels.json"
  done
  rm -f "$DEST/A2R-names.so"
  for c in A16 B; do
    # The IR the profile keys count in, for bench/profile_by_kind.py.
    "$BIN/dc-compile" "$DEST/$c.mlir" --world-size=1 --target=h200 --profile-ops \
      --mlir-print-ir-before=dc-profile-ops --mlir-elide-elementsattrs-if-larger=16 \
      -o "$DEST/bench/$c-h200-w1-prof.so" 2> "$DEST/bench/$c-h200-w1-prof.mlir"
    # Its matrix products, for bench/kernel_bench.py's torch.matmul side.
    python3 bench/kernel_table.py --gemms "$DEST/bench/$c-h200-w1-prof.mlir" \
      > "$DEST/bench/$c-gemms.json"
    # dc-report's predicted step and per-op trace, for bench/calibrate.py.
    "$BIN/dc-opt" "$DEST/$c.mlir" \
      --dc-zero3-pipeline="world-size=1 target=h200 optimizer-state-bytes=12" \
      --dc-report="optimizer-state-bytes=12 trace=$DEST/bench/$c-predicted.json" \
      -o /dev/null > "$DEST/bench/$c-report.txt"
  done
fi
rm -f "$DEST"/*.mlir
ls -la "$DEST" | tail -n +2
echo "packed $(du -sh "$DEST" | cut -f1) into $DEST"
