#!/usr/bin/env bash
# dc's one entry point for building, testing and running the bundled example.
#
#   ./build.sh example   set up, build everything, run the main job on the bundled example
#   ./build.sh test      set up, build everything, run `sanitize` and `fuzz` (HARDENING=0:
#                        not these two), then every test (GoogleTest, then lit, last)
#   ./build.sh sanitize  libdcrt and dc-run built with ASan + UBSan (runtime-only, in
#                        $BUILD_DIR-asan): their unit tests, then the runtime and some
#                        end-to-end lit tests with that dc-run (needs the main build)
#   ./build.sh fuzz      the libFuzzer targets (clang, in $BUILD_DIR-fuzz), each run for
#                        FUZZ_SECONDS (default 30) from seeds taken from the tests
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
          libcli11-dev clang-format-22 clang-22 libclang-rt-22-dev
          python3-torch python3-numpy)  # python3-torch: dc_torch's tests (test/Frontend)

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

# The runtime (libdcrt) and dc-run under AddressSanitizer and
# UndefinedBehaviorSanitizer: a runtime-only build (no MLIR) whose unit and
# MPI tests run, then lit tests that run dc-run (runtime tests and an
# end-to-end run of a compiled artifact) with its dc-run and libdcrt first on
# PATH. Any report fails the run (-fno-sanitize-recover); what Open MPI keeps
# until exit is not ours (.ci/lsan.supp).
sanitize() {
  local dir="$BUILD_DIR-asan"
  echo "== runtime + dc-run with ASan/UBSan ($dir)"
  cmake -G Ninja -S . -B "$dir" -DCMAKE_BUILD_TYPE=Release -DDC_RUNTIME_ONLY=ON \
    -DDC_ENABLE_CUDA=OFF -DDC_SANITIZE=address,undefined -DDC_WERROR=ON
  # Set before the build too: it runs the unit tests to list them. Full
  # stacks (no fast unwinding through Open MPI) let the suppressions match.
  export ASAN_OPTIONS=detect_leaks=1:fast_unwind_on_malloc=0:strict_string_checks=1:allocator_may_return_null=1
  export LSAN_OPTIONS="suppressions=$PWD/.ci/lsan.supp:print_suppressions=0"
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
  # LeakSanitizer's own stop-the-world tracer can crash at exit ("Tracer
  # caught signal 11 ... LeakSanitizer has encountered a fatal error",
  # google/sanitizers#1353; on this kind of machine it did for whole runs):
  # not a finding in our code. Listing the unit tests during the build is
  # not a test, so it runs without the leak check; tests that fail with
  # that crash in the log run again without the leak check (ASan and UBSan
  # still on), and anything else that fails fails the run.
  local no_leaks=${ASAN_OPTIONS/detect_leaks=1/detect_leaks=0}
  ASAN_OPTIONS=$no_leaks ninja -C "$dir" -j "$JOBS"
  if ! ctest --test-dir "$dir" --output-on-failure -j "$JOBS" 2>&1 | tee "$dir/ctest.log"; then
    grep -q "LeakSanitizer has encountered a fatal error" "$dir/ctest.log" || return 1
    echo "== LeakSanitizer crashed in itself: the failed tests again without the leak check"
    ASAN_OPTIONS=$no_leaks ctest --test-dir "$dir" --output-on-failure -j "$JOBS" --rerun-failed
  fi
  # The error paths, checkpoints, data and one compiled artifact on 1-2
  # ranks by default (about 100 s); SANITIZE_ALL=1: every runtime test and
  # three end-to-end runs (about 4 min).
  local tests=("$BUILD_DIR"/test/Runtime/dc-run-{errors,checkpoint,data}.test
               "$BUILD_DIR/test/Conversion/e2e/mlp-ranks.test")
  [ "${SANITIZE_ALL:-0}" = 1 ] && tests=("$BUILD_DIR/test/Runtime"
    "$BUILD_DIR"/test/Conversion/e2e/{mlp-ranks,checkpoint-resume,offload}.test)
  if ! "$LLVM/bin/lit" -sv --param runtime_tools_dir="$dir/bin" "${tests[@]}" 2>&1 | tee "$dir/lit.log"; then
    grep -q "LeakSanitizer has encountered a fatal error" "$dir/lit.log" || return 1
    echo "== LeakSanitizer crashed in itself: these tests again without the leak check"
    ASAN_OPTIONS=$no_leaks "$LLVM/bin/lit" -sv --param runtime_tools_dir="$dir/bin" "${tests[@]}"
  fi
  unset ASAN_OPTIONS LSAN_OPTIONS UBSAN_OPTIONS
}

# Seeds for the fuzzers, from what the tests already exercise: every .mlir
# test and example, split at "// -----"; inputs an earlier fuzzer run crashed
# on (fuzz/corpus/ir: every run replays them first); the manifests of test
# artifacts (fuzz/corpus/manifest); a checkpoint dc-run saves, and the
# artifact itself (the checkpoint target also runs the artifact check on its
# input); the tcp transport's messages (fuzz/corpus/tcp).
fuzz_seeds() {
  local seeds=$1
  rm -rf "$seeds" && mkdir -p "$seeds/ir" "$seeds/manifest" "$seeds/checkpoint" "$seeds/tcp"
  python3 -c '
import glob, os, sys
count = 0
for path in sorted(glob.glob("test/**/*.mlir", recursive=True) + glob.glob("examples/*.mlir")):
    for part in open(path).read().split("// -----"):
        count += 1
        open(os.path.join(sys.argv[1], "%04d.mlir" % count), "w").write(part)
' "$seeds/ir"
  cp fuzz/corpus/ir/* "$seeds/ir/"
  cp fuzz/corpus/manifest/* "$seeds/manifest/"
  cp fuzz/corpus/tcp/* "$seeds/tcp/"
  OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 \
    "$BUILD_DIR/bin/dc-run" "$BUILD_DIR/lib/tiny-linear-w1.so" --steps 1 \
    --save "$seeds/checkpoint/step1.safetensors" > /dev/null
  cp "$BUILD_DIR/lib/tiny-linear-w1.so" "$seeds/checkpoint/"
}

# libFuzzer targets (fuzz/CMakeLists.txt says what each one checks), built
# with clang, coverage, ASan and UBSan, each run for FUZZ_SECONDS from the
# seeds and what earlier runs kept ($dir/corpus). A crash, a sanitizer
# report or a timeout fails; the input is kept in $dir/crashes. ASan's user
# poisoning is off: LLVM's inline allocators poison memory in our
# instrumented code that the uninstrumented libMLIR then uses (false
# reports).
fuzz() {
  local dir="$BUILD_DIR-fuzz" seconds=${FUZZ_SECONDS:-30} target seeds
  echo "== libFuzzer targets, $seconds s each ($dir)"
  CC="$LLVM/bin/clang" CXX="$LLVM/bin/clang++" cmake -G Ninja -S . -B "$dir" \
    -DCMAKE_BUILD_TYPE=Release -DDC_FUZZ=ON -DDC_ENABLE_CUDA=OFF
  ninja -C "$dir" -j "$JOBS" dc-fuzzers
  fuzz_seeds "$dir/seeds"
  mkdir -p "$dir/crashes"
  for target in ir pipeline manifest checkpoint tcp; do
    seeds="$dir/seeds/$target"
    [ "$target" = pipeline ] && seeds="$dir/seeds/ir"
    mkdir -p "$dir/corpus/$target"
    if ! ASAN_OPTIONS=detect_leaks=0:allow_user_poisoning=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1 \
        "$dir/bin/dc-fuzz-$target" -max_total_time="$seconds" -timeout=30 \
        -rss_limit_mb=4096 -max_len=65536 -print_final_stats=1 \
        -artifact_prefix="$dir/crashes/$target-" "$dir/corpus/$target" "$seeds" \
        > "$dir/fuzz-$target.log" 2>&1; then
      tail -n 60 "$dir/fuzz-$target.log"
      echo "== dc-fuzz-$target failed; the input is in $dir/crashes/" >&2
      return 1
    fi
    echo "dc-fuzz-$target: $(grep -o 'number_of_executed_units: [0-9]*' \
      "$dir/fuzz-$target.log" | grep -o '[0-9]*$') executions in $seconds s," \
      "corpus $(find "$dir/corpus/$target" -type f | wc -l) inputs, no crash"
  done
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
    --dc-report="trace=$out/mlp_step.predicted.json" \
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
  test)
    setup; check_format; build
    # HARDENING=0 leaves out the sanitized runtime and the fuzzers (their
    # two extra builds and about 5 minutes of runs). They run first so that
    # the test runner's summary line (lit, last) ends the run.
    if [ "${HARDENING:-1}" != 0 ]; then sanitize; fuzz; fi
    run_tests ;;
  sanitize) setup; sanitize ;;
  fuzz) setup; fuzz ;;
  format) project_sources | xargs "$LLVM/bin/clang-format" -i ;;
  example) setup; build; run_example ;;
  *) echo "usage: $0 {example|test|sanitize|fuzz|setup|format}" >&2; exit 2 ;;
esac
