#!/usr/bin/env bash
# The Hugging Face model suite's run phase, on a GPU machine: every family
# bench/hf_frontend.py exported (there) and bench/pack-hf-artifacts.sh
# compiled (here) trained 20 AdamW steps by dc-run from the same seeded
# weights on the exported token file, f32 and bf16 on one GPU and f32 on 2
# host ranks (ZeRO-3); the losses against PyTorch's from the same weights
# and data (bench/hf_frontend.py compare), one table in OUT/hf-table.md.
# runtime/test/gpu/run.sh runs it when the artifacts are there.
#
#   bash bench/gpu_hf_bench.sh OUT      (ART: default .gpu-artifacts/hf)
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_hf_bench.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/hf}
start=$(date +%s)
# The weights from transformers' seeded models (not carried: 8 MB each).
python3 bench/hf_frontend.py weights "$ART" || { echo "FAILED: weights"; exit 1; }
STEPS=$(python3 -c "import json; d=json.load(open('$ART/export.json')); print(len(next(e for e in d['models'].values() if 'torch-f32' in e)['torch-f32']))")
train() { # ARTIFACT
  local so=$1 name m n
  name=$(basename "$so" .so)            # MODEL-DTYPE-{gpu,host}-wN
  m=${name%%-*}; n=${name##*-w}
  timeout 300 "$BUILD/bin/dc-run" --nproc "$n" "$so" --init "$ART/$m-init.safetensors" \
    --data "$ART/tokens.bin" --steps "$STEPS" > "$OUT/$name.log" 2>&1 \
    || { echo "$name: FAILED (rc $?)"; tail -3 "$OUT/$name.log"; }
}
# The host runs (a core per rank, seconds per step) side by side, HOST_JOBS
# at a time, while the GPU runs go one after the other.
HOST_JOBS=${HOST_JOBS:-$(( $(nproc) / 3 ))}
logs=()
for so in "$ART"/*-host-*.so; do
  [ -e "$so" ] || continue
  while [ "$(jobs -rp | wc -l)" -ge "$HOST_JOBS" ]; do wait -n; done
  train "$so" &
  logs+=("$OUT/$(basename "$so" .so).log")
done
for so in "$ART"/*-gpu-*.so; do
  [ -e "$so" ] || continue
  train "$so"
  logs+=("$OUT/$(basename "$so" .so).log")
done
wait
python3 bench/hf_frontend.py compare "$ART" "${logs[@]}" | tee "$OUT/hf-table.md"
rc=${PIPESTATUS[0]}
echo "hf suite: ${#logs[@]} runs in $(( $(date +%s) - start )) s"
exit $rc
