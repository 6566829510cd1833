#!/usr/bin/env bash
# GPU benchmarks in one go: copy_bench (pinned host <-> device copies, copies
# against a GEMM) and the PyTorch peer (bench/peer_torch.py) on configs A and
# B over every visible GPU. Every log and JSON result goes into OUTDIR, with a
# summary (summary.md) at the end; a failed run is recorded and the next one
# runs.
#
# Usage: bash bench/gpu_bench.sh OUTDIR [--quick] [--compile] [--nproc N]
#   --quick     the tiny config only, and copy_bench with fewer sizes
#   --compile   also the torch.compile variants (slow: a minute or more each)
#   --nproc N   GPUs (torchrun processes) to use; default: all visible
# Environment: NVCC (compiler), NVCC_ARCH (default sm_90), PYTHON (default
# python3), RUN_TIMEOUT (seconds per run, default 300).
set -u -o pipefail

usage() { sed -n '/^# Usage:/,/^[^#]/s/^# \{0,1\}//p' "$0" >&2; exit 2; }
die() { echo "gpu_bench.sh: error: $*" >&2; exit 1; }

OUTDIR=""
QUICK=0
COMPILE=0
NPROC=""
while [ $# -gt 0 ]; do
  case "$1" in
    --quick) QUICK=1 ;;
    --compile) COMPILE=1 ;;
    --nproc) [ $# -ge 2 ] || usage; NPROC="$2"; shift ;;
    -h|--help) usage ;;
    -*) echo "gpu_bench.sh: unknown option $1" >&2; usage ;;
    *) [ -z "$OUTDIR" ] || usage; OUTDIR="$1" ;;
  esac
  shift
done
[ -n "$OUTDIR" ] || usage

REPO="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
PYTHON="${PYTHON:-python3}"
NVCC_ARCH="${NVCC_ARCH:-sm_90}"
RUN_TIMEOUT="${RUN_TIMEOUT:-300}"
# NVLink multicast off (the shared reference machines require it).
export NCCL_NVLS_ENABLE="${NCCL_NVLS_ENABLE:-0}"

# --- prerequisites -----------------------------------------------------------
command -v nvidia-smi >/dev/null || die "nvidia-smi not found: is this a machine with an NVIDIA GPU and driver?"
NVCC="${NVCC:-$(command -v nvcc || true)}"
[ -n "$NVCC" ] || { [ -x /usr/local/cuda/bin/nvcc ] && NVCC=/usr/local/cuda/bin/nvcc; }
{ [ -n "$NVCC" ] && [ -x "$NVCC" ]; } || die "nvcc not found (put the CUDA toolkit's bin on PATH or set NVCC)"
command -v "$PYTHON" >/dev/null || die "$PYTHON not found"
TORCH_INFO="$("$PYTHON" -c 'import torch; print(torch.__version__, torch.cuda.is_available(), torch.cuda.device_count())' 2>&1)" \
  || die "PyTorch cannot be imported by $PYTHON: $TORCH_INFO"
read -r TORCH_VERSION TORCH_CUDA TORCH_NGPU <<<"$(tail -n 1 <<<"$TORCH_INFO")"
[ "$TORCH_CUDA" = "True" ] || die "PyTorch $TORCH_VERSION sees no GPU (torch.cuda.is_available() is False)"
command -v timeout >/dev/null || die "timeout (coreutils) not found"

SMI_NGPU="$(nvidia-smi -L 2>/dev/null | grep -c '^GPU' || true)"
if [ -z "$NPROC" ]; then
  # nvidia-smi ignores CUDA_VISIBLE_DEVICES; PyTorch's count honours it.
  NPROC="$SMI_NGPU"
  if [ -n "${CUDA_VISIBLE_DEVICES:-}" ] || [ "$TORCH_NGPU" -lt "$NPROC" ]; then NPROC="$TORCH_NGPU"; fi
fi
{ [[ "$NPROC" =~ ^[0-9]+$ ]] && [ "$NPROC" -ge 1 ]; } || die "no usable GPU count (nvidia-smi -L: ${SMI_NGPU:-?}, torch: $TORCH_NGPU, --nproc: $NPROC)"
[ "$NPROC" -le "$TORCH_NGPU" ] || die "--nproc $NPROC but PyTorch sees only $TORCH_NGPU GPU(s)"

mkdir -p "$OUTDIR" || die "cannot create $OUTDIR"
OUTDIR="$(cd "$OUTDIR" && pwd)"
RESULTS="$OUTDIR/runs.tsv"        # name, status, seconds, log, json
: >"$RESULTS"
START_ALL=$(date +%s)

# --- environment record --------------------------------------------------------
{
  echo "date: $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "host: $(hostname)"
  echo "repo: $REPO ($(git -C "$REPO" rev-parse --short HEAD 2>/dev/null || echo 'not a git checkout'))"
  echo "gpus used: $NPROC (nvidia-smi -L: $SMI_NGPU, torch: $TORCH_NGPU)"
  echo "NCCL_NVLS_ENABLE=$NCCL_NVLS_ENABLE CUDA_VISIBLE_DEVICES=${CUDA_VISIBLE_DEVICES:-unset}"
  echo "torch: $TORCH_VERSION ($PYTHON: $(command -v "$PYTHON"))"
  "$PYTHON" - <<'PYEOF' 2>&1
import torch
try:
    nccl = ".".join(map(str, torch.cuda.nccl.version()))
except Exception as e:
    nccl = f"unknown ({e})"
print("torch cuda:", torch.version.cuda, " nccl:", nccl)
PYEOF
  echo "nvcc: $("$NVCC" --version | tail -n 1)"
  nvidia-smi -L
  nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm,power.limit --format=csv
  nvidia-smi topo -m 2>&1 || true
} >"$OUTDIR/env.txt" 2>&1
echo "gpu_bench.sh: $NPROC GPU(s), torch $TORCH_VERSION, results in $OUTDIR"

record() { printf '%s\t%s\t%s\t%s\t%s\n' "$@" >>"$RESULTS"; }

# Runs a command with a timeout, output to LOG; records the outcome.
run_logged() {
  local name="$1" log="$2" json="$3"; shift 3
  local t0=$SECONDS status rc
  echo "== $name: $*" | tee "$log"
  timeout -k 30 "$RUN_TIMEOUT" "$@" >>"$log" 2>&1
  rc=$?
  if [ $rc -eq 0 ]; then status=ok
  elif [ $rc -eq 124 ] || [ $rc -eq 137 ]; then status="timeout(${RUN_TIMEOUT}s)"
  else status="failed(rc=$rc)"; fi
  [ $rc -eq 0 ] && [ -n "$json" ] && [ ! -s "$json" ] && status="failed(no json)"
  echo "   $status after $((SECONDS - t0)) s; log $log"
  [ "$status" = ok ] || tail -n 5 "$log" | sed 's/^/   | /'
  record "$name" "$status" "$((SECONDS - t0))" "$log" "$json"
}

# --- copy_bench ----------------------------------------------------------------
COPY_BIN="$OUTDIR/copy_bench"
echo "== build copy_bench: $NVCC -O2 -arch=$NVCC_ARCH"
if "$NVCC" -O2 -arch="$NVCC_ARCH" -o "$COPY_BIN" "$REPO/bench/copy_bench.cu" -lcublas \
    >"$OUTDIR/copy_bench.build.log" 2>&1; then
  COPY_ARGS=(--json "$OUTDIR/copy_bench.json")
  [ $QUICK -eq 1 ] && COPY_ARGS+=(--quick)
  rm -f "$OUTDIR/copy_bench.json"
  run_logged copy_bench "$OUTDIR/copy_bench.log" "$OUTDIR/copy_bench.json" "$COPY_BIN" "${COPY_ARGS[@]}"
else
  echo "   build failed; log $OUTDIR/copy_bench.build.log"
  tail -n 5 "$OUTDIR/copy_bench.build.log" | sed 's/^/   | /'
  record copy_bench "failed(build)" 0 "$OUTDIR/copy_bench.build.log" ""
fi

# --- PyTorch peer --------------------------------------------------------------
if [ $QUICK -eq 1 ]; then CONFIGS=(tiny); else CONFIGS=(A B); fi
# name suffix | peer arguments
VARIANTS=(
  "fsdp2|--mode fsdp2"
  "fsdp2_offload|--mode fsdp2 --offload-activations"
  "replicated|--mode replicated"
)
if [ $COMPILE -eq 1 ]; then
  VARIANTS+=("fsdp2_compile|--mode fsdp2 --compile" "replicated_compile|--mode replicated --compile")
fi
for config in "${CONFIGS[@]}"; do
  for variant in "${VARIANTS[@]}"; do
    suffix="${variant%%|*}"
    read -r -a peer_args <<<"${variant#*|}"
    name="peer_${config}_${suffix}"
    rm -f "$OUTDIR/$name.json"
    run_logged "$name" "$OUTDIR/$name.log" "$OUTDIR/$name.json" \
      "$PYTHON" -m torch.distributed.run --standalone --nproc-per-node "$NPROC" \
      "$REPO/bench/peer_torch.py" --config "$config" "${peer_args[@]}" --world "$NPROC" \
      --json-out "$OUTDIR/$name.json"
  done
done

# --- summary -------------------------------------------------------------------
"$PYTHON" - "$RESULTS" "$OUTDIR/summary.md" "$NPROC" "$(($(date +%s) - START_ALL))" <<'EOF'
import json, os, sys

results, out, nproc, total = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4]
rows = [line.rstrip("\n").split("\t") for line in open(results) if line.strip()]

def load(path):
    try:
        with open(path) as f:
            return json.loads(f.read().strip().splitlines()[-1])
    except Exception:
        return None

def last_error(log):
    try:
        lines = [l.strip() for l in open(log, errors="replace") if l.strip()]
    except OSError:
        return ""
    for l in reversed(lines):
        if "error" in l.lower():
            return l[:160]
    return lines[-1][:160] if lines else ""

lines = [f"# GPU benchmarks ({nproc} GPU(s), {total} s in all)", ""]
copy = next((load(r[4]) for r in rows if r[0] == "copy_bench" and r[1] == "ok"), None)
if copy:
    lines += [f"## copy_bench: {copy['gpu']}, {copy['copy_engines']} copy engines, {copy['date']}", "",
              "| size | D2H GB/s | H2D GB/s | both: D2H | both: H2D |", "|---|---|---|---|---|"]
    for s in copy["sizes"]:
        size = f"{s['bytes'] >> 30} GiB" if s["bytes"] >= 1 << 30 else f"{s['bytes'] >> 20} MiB"
        lines.append(f"| {size} | {s['d2h_GBps']:.1f} | {s['h2d_GBps']:.1f} | "
                     f"{s['both_d2h_GBps']:.1f} | {s['both_h2d_GBps']:.1f} |")
    g = copy["gemm"]
    lines += ["", f"4 KiB copy: {copy['small_copy_us']['d2h']:.2f} us D2H, {copy['small_copy_us']['h2d']:.2f} us H2D. "
              f"bf16 GEMM {g['n']}^3: {g['alone_tflops']} TFLOP/s alone, {g['with_copies_tflops']} with 1 GiB copies "
              f"both ways (slowdown {g['slowdown_pct']:.2f}%); copies during the GEMM: D2H {g['d2h_GBps_during_gemm']:.1f}, "
              f"H2D {g['h2d_GBps_during_gemm']:.1f} GB/s.", "",
              "dc target: `" + json.dumps(copy["target"]) + "`", ""]

lines += ["## runs", "", "| run | status | s | step median (ms) | step mean (ms) | peak (GiB) | TFLOP/s/GPU | note |",
          "|---|---|---|---|---|---|---|---|"]
for name, status, secs, log, path in rows:
    r = load(path) if path else None
    if name.startswith("peer_") and r and r.get("ok"):
        note = f"offloaded {r['offloaded_GiB_per_step']} GiB/step" if "offloaded_GiB_per_step" in r else ""
        lines.append(f"| {name} | {status} | {secs} | {r['step_ms_median']:.2f} | {r['step_ms_mean']:.2f} | "
                     f"{r['peak_GiB']:.2f} | {r['tflops_per_gpu']} | {note} |")
    else:
        note = (r or {}).get("error") or ("" if status == "ok" else last_error(log))
        lines.append(f"| {name} | {status} | {secs} | | | | | {note.replace('|', '/')} |")
peer = next((load(r[4]) for r in rows if r[0].startswith("peer_") and load(r[4])), None)
if peer:
    lines += ["", f"peer: {peer.get('gpu')}, torch {peer.get('torch')}, NCCL {peer.get('nccl')}, world {peer.get('world')}"]
text = "\n".join(lines) + "\n"
open(out, "w").write(text)
print(text)
EOF

FAILED=$(awk -F'\t' '$2 != "ok"' "$RESULTS" | wc -l)
echo "gpu_bench.sh: $(wc -l <"$RESULTS") runs, $FAILED not ok; summary $OUTDIR/summary.md"
[ "$FAILED" -eq 0 ]
