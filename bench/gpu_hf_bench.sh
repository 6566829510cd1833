#!/usr/bin/env bash
# On a GPU machine: the Hugging Face models bench/hf_frontend.py exported
# and bench/pack-hf-artifacts.sh compiled, trained 20 AdamW steps by dc-run
# from the exported weights on the exported token file (f32 on one GPU and
# on 2 host ranks, bf16 on one GPU), their losses against PyTorch's from the
# same weights and data (bench/hf_frontend.py compare).
#
#   bash bench/gpu_hf_bench.sh OUT
set -uo pipefail
cd "$(dirname "$0")/.."
OUT=${1:?usage: gpu_hf_bench.sh OUT}
mkdir -p "$OUT"
source bench/gpu_env.sh
ART=${ART:-.gpu-artifacts/hf}
STEPS=$(python3 -c "import json; d=json.load(open('$ART/export.json')); print(len(next(iter(d['models'].values()))['torch-f32']))")
logs=()
for so in "$ART"/*.so; do
  name=$(basename "$so" .so)            # MODEL-DTYPE-{gpu,host}-wN
  m=${name%%-*}; n=${name##*-w}
  echo "== $name: $STEPS steps on $n rank(s)"
  timeout 300 "$BUILD/bin/dc-run" --nproc "$n" "$so" --init "$ART/$m-init.safetensors" \
    --data "$ART/tokens.bin" --steps "$STEPS" > "$OUT/$name.log" 2>&1 \
    || { echo "FAILED (rc $?)"; tail -5 "$OUT/$name.log"; }
  grep -E "^step=($STEPS|1) " "$OUT/$name.log"
  logs+=("$OUT/$name.log")
done
python3 bench/hf_frontend.py compare "$ART" "${logs[@]}" | tee "$OUT/hf-table.md"
