#!/usr/bin/env bash
# Configures and builds gpuledger into ${BUILD_DIR:-build} (Release, Ninja; the
# CUDA backend is compiled when nvcc is found). Extra arguments go to cmake:
# the build folder is (re)configured when they are given or when it has never
# been configured. ccache, when installed, is used as the compiler launcher,
# with the source tree as its base directory (a second clone hits the cache).
#   TARGETS="a b"  builds only those targets (default: everything);
#   PROGRESS=1     prints one progress line per tenth of the build instead of
#                  one per step (compiler errors and warnings still print whole).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
if command -v ccache >/dev/null 2>&1; then export CCACHE_BASEDIR="${CCACHE_BASEDIR:-$ROOT}"; fi
if [ ! -f "$BUILD_DIR/build.ninja" ] || [ $# -gt 0 ]; then
  launcher=()
  if command -v ccache >/dev/null 2>&1; then
    launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache -DCMAKE_CUDA_COMPILER_LAUNCHER=ccache)
  fi
  cmake -S "$ROOT" -B "$BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=Release "${launcher[@]}" "$@" >/dev/null
fi
JOBS="${JOBS:-$(nproc)}"
targets=()
for t in ${TARGETS:-}; do targets+=(--target "$t"); done
if [ "${PROGRESS:-0}" = "1" ]; then
  # Ninja's status "[done/total]" lines thinned to one per 10%; everything else
  # (the compiler's messages, "FAILED:" lines) passes through.
  NINJA_STATUS="[%f/%t] " cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}" 2>&1 |
    awk -v start="$SECONDS" '
      /^\[[0-9]+\/[0-9]+\] / {
        split(substr($1, 2), p, "/"); pct = int(100 * p[1] / p[2])
        if (pct >= next_pct || p[1] == p[2]) {
          printf "build: %3d%% (%d of %d steps)\n", pct, p[1], p[2]; fflush(); next_pct = pct - pct % 10 + 10
        }
        next
      }
      { print; fflush() }'
else
  cmake --build "$BUILD_DIR" -j "$JOBS" "${targets[@]}"
fi
