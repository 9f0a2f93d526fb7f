#!/usr/bin/env bash
# Configures and builds gpuledger into ${BUILD_DIR:-build} (Release; the CUDA
# backend is compiled when nvcc is found). Extra arguments go to cmake: the
# build folder is (re)configured when they are given or when it has never been
# configured. ccache, when installed, is used as the compiler launcher.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
fi
JOBS="${JOBS:-$(nproc)}"
cmake --build "$BUILD_DIR" -j "$JOBS"
