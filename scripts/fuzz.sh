#!/usr/bin/env bash
# Builds and runs the libFuzzer targets of tests/fuzz (clang; the parsers of
# model files, request traces, sweep grids and reports).
#   scripts/fuzz.sh build            configure and build them in ${FUZZ_BUILD_DIR:-build-fuzz}
#   scripts/fuzz.sh run SECONDS      run each for SECONDS from its seed corpus
#                                    (tests/fuzz/corpus/<target>, read only; new
#                                    inputs go to ${FUZZ_BUILD_DIR}/corpus/<target>)
# A finding (crash, sanitizer report, leak, timeout, out-of-memory) stops that
# target, leaves its input as ${FUZZ_BUILD_DIR}/findings/<target>/crash-* and
# makes the run exit 1 after every target has run.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
FUZZ_BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
TARGETS=(fuzz_model_file fuzz_trace fuzz_grid fuzz_report)

case "${1:-}" in
  build)
    launcher=()
    command -v ccache >/dev/null 2>&1 && launcher=(-DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
    CC=clang CXX=clang++ cmake -S "$ROOT" -B "$FUZZ_BUILD_DIR" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
      "${launcher[@]}" -DGPULEDGER_FUZZ=ON -DGPULEDGER_WERROR=ON -DGPULEDGER_MPI=OFF -DGPULEDGER_BLAS=OFF \
      -DGPULEDGER_CUDA=OFF -DGPULEDGER_BUILD_BENCH=OFF >/dev/null
    cmake --build "$FUZZ_BUILD_DIR" -j "${JOBS:-$(nproc)}" --target "${TARGETS[@]}"
    ;;
  run)
    seconds="${2:?usage: fuzz.sh run SECONDS}"
    failed=0
    for t in "${TARGETS[@]}"; do
      mkdir -p "$FUZZ_BUILD_DIR/corpus/$t" "$FUZZ_BUILD_DIR/findings/$t"
      # -rss_limit_mb: an input that makes a parser take more than 1 GiB is a finding.
      if ! "$FUZZ_BUILD_DIR/tests/fuzz/$t" "$FUZZ_BUILD_DIR/corpus/$t" "$ROOT/tests/fuzz/corpus/$t" \
          -max_total_time="$seconds" -rss_limit_mb=1024 -timeout=10 -max_len=65536 -print_final_stats=1 \
          -artifact_prefix="$FUZZ_BUILD_DIR/findings/$t/" >"$FUZZ_BUILD_DIR/$t.log" 2>&1; then
        failed=1
        echo "fuzz.sh: $t FOUND a failing input (see $FUZZ_BUILD_DIR/$t.log and findings/$t/):" >&2
        tail -30 "$FUZZ_BUILD_DIR/$t.log" >&2
      else
        echo "fuzz.sh: $t: $(grep -E '^stat::number_of_executed_units' "$FUZZ_BUILD_DIR/$t.log" | awk '{print $2}') runs" \
             "in ${seconds} s, no finding"
      fi
    done
    exit "$failed"
    ;;
  *)
    echo "usage: scripts/fuzz.sh build | run SECONDS" >&2
    exit 2
    ;;
esac
