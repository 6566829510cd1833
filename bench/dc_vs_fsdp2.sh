#!/usr/bin/env bash
# dc against PyTorch FSDP2 on 2 GPUs, side by side in one job: the PyTorch
# peer (bench/peer_torch.py) in its variants and dc's artifacts packed by
# bench/dc_vs_fsdp2_pack.sh, on configs A (16 layers) and B of
# ../shared/BENCHMARKS.md; then one table of ratios (bench/dc_vs_fsdp2_table.py).
#
#   bash bench/dc_vs_fsdp2.sh OUT [PHASE ...]
#
# Phases (default: peer dc):
#   peer    the peer's variants (PEER_VARIANTS, PEER_CONFIGS below)
#   dc      every artifact in .gpu-artifacts/fsdp2 on 2 ranks, 6 steps; the
#           plain ones also with a measured trace, the -prof ones with
#           --profile-out (per-op times for dc-compile --profile=); plus
#           .gpu-artifacts/bench's 1-rank steps (the same per-GPU batch,
#           no communication: the step without its exposed collectives)
#   (DC_RUNS: only the artifacts named, e.g. "A16-w2-fit B-w2-fit" (in file order);
#   DC_STEPS: steps of the non-plain runs; DC_W1_CONFIGS: the 1-rank runs)
#   curves  same start, same data: the peer writes its initial weights
#           (safetensors) and both train 20 steps on one token file;
#           config CURVE_CONFIG (default A16), on CURVE_NPROC GPUs (2),
#           learning rate CURVE_LR (1e-3); the peer runs twice (fused and
#           foreach AdamW): its own noise band
# ARCHIVE=FILE also packs OUT into one .tgz at the end.
# Needs the runtime-only build (made here when missing), PyTorch, 2 GPUs.
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: dc_vs_fsdp2.sh OUT [peer] [dc] [curves]}
shift
PHASES=${*:-peer dc}
mkdir -p "$OUT"
OUT=$(cd "$OUT" && pwd)
export NCCL_NVLS_ENABLE=0 TORCH_SYMM_MEM_DISABLE_MULTICAST=1 NVSHMEM_DISABLE_NVLS=1
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 DCRT_TIMEOUT_S=${DCRT_TIMEOUT_S:-120}
BUILD=${BUILD:-build-gpu}
BIN=$BUILD/bin
RUN_TIMEOUT=${RUN_TIMEOUT:-240}
PYTHON=${PYTHON:-python3}
ART=.gpu-artifacts/fsdp2
# name|options: the peer's variants (each on every config of PEER_CONFIGS).
PEER_VARIANTS=${PEER_VARIANTS:-"
replicated_compile|--mode replicated --compile
fsdp2|--mode fsdp2
fsdp2_mp|--mode fsdp2 --mixed-precision
fsdp2_mp_blocks|--mode fsdp2 --mixed-precision --compile-blocks
fsdp2_blocks|--mode fsdp2 --compile-blocks
"}
PEER_CONFIGS=${PEER_CONFIGS:-"A B"}

if [ ! -x "$BIN/dc-run" ]; then
  echo "== build (runtime only)"
  cmake -G Ninja -S . -B "$BUILD" -DDC_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PWD/.gpu-deps" > "$OUT/cmake.log" 2>&1 && \
    ninja -C "$BUILD" dc-run > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv > "$OUT/machine.txt"
git rev-parse --short HEAD >> "$OUT/machine.txt" 2>/dev/null || true
date -u +%Y-%m-%dT%H:%M:%SZ >> "$OUT/machine.txt"

# run NAME COMMAND...: bounded, line-buffered, logged; a failure is noted
# and the next run goes on.
run() {
  local name=$1; shift
  local t0=$SECONDS
  # Each line stamped with the seconds since the run began: where a slow
  # start spends its time.
  timeout -k 20 "$RUN_TIMEOUT" stdbuf -oL -eL "$@" 2>&1 | while IFS= read -r line; do
    echo "[$((SECONDS - t0))s] $line"
  done > "$OUT/$name.log"
  local rc=${PIPESTATUS[0]}
  echo "$name: rc $rc, $((SECONDS - t0)) s"
  [ $rc -eq 0 ] || tail -4 "$OUT/$name.log" | sed 's/^/   | /'
}
# PEER_NPROC: the peer's ranks (default 2).
peer() {
  local n=${PEER_NPROC:-2}
  run "$1" "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$n" \
    bench/peer_torch.py --world "$n" --json-out "$OUT/$1.json" "${@:2}"
}
dcrun() { run "$1" "$BIN/dc-run" --nproc "$2" "${@:3}"; }

for phase in $PHASES; do
  case $phase in
  peer)
    while IFS='|' read -r name options; do
      [ -n "$name" ] || continue
      for c in $PEER_CONFIGS; do
        # shellcheck disable=SC2086
        peer "peer-$c-$name" --config "$c" $options
      done
    done <<< "$PEER_VARIANTS"
    ;;
  dc)
    for so in "$ART"/*-w2-*.so; do
      name=$(basename "$so" .so)
      # DC_RUNS: only these artifacts (names without .so).
      if [ -n "${DC_RUNS:-}" ]; then [[ " $DC_RUNS " == *" $name "* ]] || continue; fi
      case $name in
        *-prof) dcrun "dc-$name" 2 "$so" --steps 4 --vocab 32000 \
                  --profile-out "$OUT/$name.profile.json" --trace "$OUT/$name.trace.json" ;;
        *-plain) dcrun "dc-$name" 2 "$so" --steps 6 --vocab 32000 --trace "$OUT/$name.trace.json" ;;
        *) dcrun "dc-$name" 2 "$so" --steps ${DC_STEPS:-6} --vocab 32000 ;;
      esac
      cp "${so%.so}.report.json" "$OUT/$name.report.json" 2> /dev/null || true
      # The measured step beside the predicted one, on one time axis.
      if [ -f "$OUT/$name.trace.json" ] && [ -f "${so%.so}.predicted.json" ]; then
        "$PYTHON" bench/merge_traces.py "$OUT/$name.trace.json" "${so%.so}.predicted.json" \
          "$OUT/$name.vs-predicted.json" || true
      fi
    done
    for c in ${DC_W1_CONFIGS-A16 B}; do
      so=.gpu-artifacts/bench/$c-h200-w1.so
      [ -f "$so" ] && dcrun "dc-$c-w1" 1 "$so" --steps 6 --vocab 32000
    done
    ;;
  curves)
    c=${CURVE_CONFIG:-A16}
    peerc=${c%16}
    "$PYTHON" bench/peer_torch.py --write-tokens "$OUT/tokens.bin" --n 4000000 --vocab 32000 --seed 1
    lr=${CURVE_LR:-1e-3}
    PEER_NPROC=${CURVE_NPROC:-2} peer "curve-peer-$c" --config "$peerc" --mode fsdp2 --mixed-precision --warmup 0 --steps 20 \
      --lr "$lr" --data "$OUT/tokens.bin" --save-init "$OUT/init-$c.safetensors"
    # The noise band: PyTorch against itself, its AdamW summing in another
    # order (foreach instead of fused), from the same weights and data.
    PEER_NPROC=${CURVE_NPROC:-2} peer "curve-peer2-$c" --config "$peerc" --mode fsdp2 --mixed-precision --warmup 0 --steps 20 \
      --lr "$lr" --data "$OUT/tokens.bin" --optimizer-impl foreach
    # CURVE_NPROC=1: both on one GPU (dc's 1-rank artifact, FSDP2 over 1).
    n=${CURVE_NPROC:-2}
    so="$ART/$c-w2-plain.so"
    [ "$n" = 1 ] && so=.gpu-artifacts/bench/$c-h200-w1.so
    dcrun "curve-dc-$c" "$n" "$so" --steps 20 --lr "$lr" --data "$OUT/tokens.bin" \
      --load "$OUT/init-$c.safetensors"
    rm -f "$OUT/init-$c.safetensors" "$OUT/tokens.bin"
    ;;
  *) echo "unknown phase $phase" >&2; exit 2 ;;
  esac
done
"$PYTHON" bench/dc_vs_fsdp2_table.py "$OUT" | tee "$OUT/table.md"
# ARCHIVE=FILE: everything in OUT in one file (a GPU call brings back few).
[ -z "${ARCHIVE:-}" ] || tar czf "$ARCHIVE" -C "$(dirname "$OUT")" "$(basename "$OUT")"
