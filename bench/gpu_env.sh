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
