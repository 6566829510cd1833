# Sourced by the GPU machine's bench scripts (OUT must be set: logs go
# there): the environment every run needs, and dc-run from a runtime-only
# build in $BUILD (default build-gpu), made once and reused.
export NCCL_NVLS_ENABLE=0 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1
BUILD=${BUILD:-build-gpu}
if [ ! -x "$BUILD/bin/dc-run" ]; then
  cmake -G Ninja -S . -B "$BUILD" -DDC_RUNTIME_ONLY=ON -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$PWD/.gpu-deps" > "$OUT/cmake.log" 2>&1 && \
    ninja -C "$BUILD" dc-run > "$OUT/build.log" 2>&1 || { tail -20 "$OUT/build.log"; exit 1; }
fi
# Nsight Compute for the scripts that profile kernels: sets NCU, or stops.
require_ncu() {
  NCU=$(command -v ncu || ls /usr/local/cuda*/bin/ncu /opt/nvidia/nsight-compute/*/ncu 2> /dev/null | head -1)
  [ -n "$NCU" ] || { echo "ncu not found"; exit 1; }
}
# run_watched LOG SECONDS CMD...: CMD with its output in LOG, ended after
# SECONDS. A run that printed its summary and has not exited 20 s later
# hangs at teardown: the stacks of every dc-run process go to LOG.stacks
# (gdb's where it is installed, else the kernel's and each thread's wchan)
# before it is killed. The exit status is CMD's (124 when ended).
run_watched() {
  local log=$1 seconds=$2; shift 2
  "$@" > "$log" 2>&1 &
  local pid=$! waited=0 after=0
  while kill -0 "$pid" 2> /dev/null; do
    sleep 1; waited=$((waited + 1))
    grep -q "^summary:" "$log" 2> /dev/null && after=$((after + 1))
    if [ "$after" -ge 20 ] || [ "$waited" -ge "$seconds" ]; then
      for p in $(pgrep -x dc-run); do
        echo "== pid $p: $(tr '\0' ' ' < /proc/$p/cmdline)"
        if command -v gdb > /dev/null; then
          timeout 60 gdb -p "$p" -batch -ex "thread apply all bt" 2>&1 | grep -v "^\[New LWP"
        else
          for t in /proc/$p/task/*; do
            echo "-- thread ${t##*/}: $(cat "$t/comm") wchan $(cat "$t/wchan")"
            cat "$t/stack" 2> /dev/null
          done
        fi
      done > "$log.stacks" 2>&1
      echo "run_watched: no exit after ${waited} s (${after} s after its summary); stacks in $log.stacks" >> "$log"
      pkill -9 -x dc-run; kill -9 "$pid" 2> /dev/null; wait "$pid" 2> /dev/null
      return 124
    fi
  done
  wait "$pid"
}
