#!/usr/bin/env bash
# dc's one entry point for building, testing and running the bundled example.
#
#   ./build.sh example   set up, build everything, run the main job on the bundled example
#   ./build.sh test      set up, build everything, run every test (GoogleTest, then lit)
#   ./build.sh setup     only install what a fresh Debian 12 machine lacks
#   ./build.sh format    clang-format every C/C++ source of dc in place
#
# BUILD_DIR (default: build) and JOBS (default: 2) can be set in the environment.
set -euo pipefail
cd "$(dirname "$0")"
BUILD_DIR=${BUILD_DIR:-build}
JOBS=${JOBS:-2}
LLVM=/usr/lib/llvm-22

PACKAGES=(cmake ninja-build g++ python3 llvm-22-dev llvm-22-tools libmlir-22-dev
          mlir-22-tools libgtest-dev libopenmpi-dev openmpi-bin nlohmann-json3-dev
          libcli11-dev clang-format-22)

setup() {
  local missing=()
  for p in "${PACKAGES[@]}"; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "ok installed" || missing+=("$p")
  done
  [ ${#missing[@]} -eq 0 ] && return 0
  echo "== installing: ${missing[*]}"
  local sudo=""
  [ "$(id -u)" -ne 0 ] && sudo=sudo
  $sudo apt-get update -q
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q "${missing[@]}"
}

build() {
  cmake -G Ninja -S . -B "$BUILD_DIR" -DCMAKE_BUILD_TYPE=Release -DDC_WERROR=ON \
    -DLLVM_EXTERNAL_LIT="$LLVM/bin/lit"
  ninja -C "$BUILD_DIR" -j "$JOBS"
}

# dc's own C and C++ (not generated code, not upstream's) must be formatted
# as clang-format (LLVM style, .clang-format) writes it; `./build.sh format`
# rewrites it so.
project_sources() {
  git ls-files '*.c' '*.cpp' '*.h' '*.hpp' '*.cu' 2>/dev/null ||
    find dialects include lib runtime tools test bench examples \
      \( -name '*.c' -o -name '*.cpp' -o -name '*.h' -o -name '*.hpp' -o -name '*.cu' \)
}

check_format() {
  echo "== clang-format --dry-run (LLVM style)"
  project_sources | xargs "$LLVM/bin/clang-format" --dry-run --Werror
}

run_tests() {
  ctest --test-dir "$BUILD_DIR" --output-on-failure -j "$JOBS"
  # lit last: its summary line ends the run.
  "$LLVM/bin/lit" -sv "$BUILD_DIR/test"
}

# The main job on the bundled example: shard the MLP training step over 2
# ranks and schedule it against one memory budget (printing the predicted
# report), compile it to a native artifact, and train it for 5 steps on 2 CPU
# ranks with the host (MPI) runtime, printing the per-step losses.
run_example() {
  local out="$BUILD_DIR/example"
  mkdir -p "$out"
  echo "== dc-zero3-pipeline on examples/mlp_step.mlir (2 ranks, cpu target, 64 KiB budget)"
  "$BUILD_DIR/bin/dc-opt" examples/mlp_step.mlir \
    --dc-zero3-pipeline="world-size=2 target=cpu memory-budget=64KiB" \
    --dc-report="target=cpu memory-budget=64KiB trace=$out/mlp_step.predicted.json" \
    -o "$out/mlp_step.scheduled.mlir"
  echo "== schedule: $out/mlp_step.scheduled.mlir; predicted streams: $out/mlp_step.predicted.json (ui.perfetto.dev)"
  echo "== dc-compile -> $out/mlp_step.so"
  "$BUILD_DIR/bin/dc-compile" examples/mlp_step.mlir --world-size=2 --target=cpu \
    --memory-budget=64KiB -o "$out/mlp_step.so"
  echo "== dc-run --nproc 2: 5 AdamW steps"
  "$BUILD_DIR/bin/dc-run" --nproc 2 "$out/mlp_step.so" --steps 5 --lr 0.01 \
    --trace "$out/mlp_step.measured.json"
  echo "== measured streams: $out/mlp_step.measured.json"
}

case "${1:-}" in
  setup) setup ;;
  test) setup; check_format; build; run_tests ;;
  format) project_sources | xargs "$LLVM/bin/clang-format" -i ;;
  example) setup; build; run_example ;;
  *) echo "usage: $0 {example|test|setup|format}" >&2; exit 2 ;;
esac
