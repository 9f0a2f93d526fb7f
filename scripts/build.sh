#!/usr/bin/env bash
# Configures and builds gpuledger into ${BUILD_DIR:-build} (Release; the CUDA
# backend is compiled when nvcc is found). Extra arguments go to cmake.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
if [ ! -f "$BUILD_DIR/build.ninja" ]; then
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "$@" >/dev/null
fi
JOBS="${JOBS:-$(nproc)}"
cmake --build "$BUILD_DIR" -j "$JOBS"
