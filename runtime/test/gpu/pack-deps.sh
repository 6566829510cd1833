#!/usr/bin/env bash
# Copies the header-only libraries the runtime-only build needs (nlohmann-json,
# CLI11, with their CMake packages) into DEST (default .gpu-deps at the repo
# root), for a GPU machine that has CUDA, NCCL, MPI and CMake but not these.
# Run it where they are installed (./build.sh setup); run.sh finds DEST.
set -euo pipefail
cd "$(dirname "$0")/../../.."
DEST=${1:-.gpu-deps}
rm -rf "$DEST"
mkdir -p "$DEST/include" "$DEST/share/cmake"
cp -r /usr/include/nlohmann /usr/include/CLI "$DEST/include/"
cp -r /usr/share/cmake/nlohmann_json /usr/share/cmake/CLI11 "$DEST/share/cmake/"
echo "packed $(du -sh "$DEST" | cut -f1) into $DEST"
