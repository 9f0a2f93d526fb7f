#!/usr/bin/env bash
# The test command for a fresh machine (CI runs it: .ci/run). In order:
#   1. scripts/setup.sh installs what is missing;
#   2. the format check (scripts/format.sh --check): a file that differs from
#      .clang-format fails the run (at the end, after the tests, so that one run
#      reports everything). FORMAT_CHECK=0 skips it, e.g. on a work tree not yet
#      formatted; CI leaves it on;
#   3. the main build (${BUILD_DIR:-build}: MPI, OpenBLAS, CUDA when nvcc is
#      found; configured as scripts/demo.sh configures it, scripts/main_config.sh,
#      so that after the demo only the tests are left to build) with warnings
#      as errors, and every test that does not need a GPU
#      (unit, cli, mpi, install; gpu tests skip here). With SANITIZE=1 its unit
#      tests are those labelled platform (-DGPULEDGER_GENERIC_UNIT_TESTS=OFF):
#      the CPU kernels and the tests that read the build's switches; the others
#      run once, in step 4. Extra arguments go to this ctest;
#   4. a second build with only a compiler (${MINIMAL_BUILD_DIR:-build-minimal}: no MPI, no
#      BLAS — the built-in GEMM —, no CUDA), warnings as errors, under
#      AddressSanitizer and UndefinedBehaviorSanitizer (-DGPULEDGER_SANITIZE=ON;
#      any UB report is fatal; compiled at -Og, the CPU kernels at -O2), and its
#      unit tests and the bad-input corpus. The CLI tests, which drive the binary
#      end to end, run in step 3 only (-DGPULEDGER_CLI_TESTS=OFF here), and so
#      do the MPI tests (Open MPI's own allocations make ASan's leak checker
#      report at exit). SANITIZE=0 builds it plain instead, and runs its unit
#      tests but the bad-input corpus and the CLI tests (both run in step 3);
#   5. (with SANITIZE=1) the libFuzzer targets (tests/fuzz, clang,
#      ${FUZZ_BUILD_DIR:-build-fuzz}), each run for ${FUZZ_SECONDS:-15} s from
#      its seed corpus (FUZZ_SECONDS=0 skips the step). A finding fails the
#      run and leaves its input in the fuzz build folder.
# Each step's time is printed. ccache is used when installed (scripts/build.sh).
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
BUILD_DIR="${BUILD_DIR:-$ROOT/build}"
MINIMAL_BUILD_DIR="${MINIMAL_BUILD_DIR:-$ROOT/build-minimal}"
FUZZ_BUILD_DIR="${FUZZ_BUILD_DIR:-$ROOT/build-fuzz}"
FUZZ_SECONDS="${FUZZ_SECONDS:-15}"
FORMAT_CHECK="${FORMAT_CHECK:-1}"
SANITIZE="${SANITIZE:-1}"

timed() {  # timed NAME CMD...: runs CMD, then prints how long it took
  local name="$1" t0=$SECONDS
  shift
  "$@"
  echo "test.sh: $name took $((SECONDS - t0)) s"
}

"$ROOT/scripts/setup.sh"

format_failed=0
if [ "$FORMAT_CHECK" = "1" ]; then
  if ! "$ROOT/scripts/format.sh" --check; then
    format_failed=1
    echo "test.sh: FORMAT CHECK FAILED (the files above); scripts/format.sh --fix rewrites them." \
         "The tests still run; the exit status will be 1." >&2
  fi
else
  echo "test.sh: format check skipped (FORMAT_CHECK=$FORMAT_CHECK)"
fi

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1
export JOBS="${JOBS:-$(nproc)}"
run_ctest() {  # run_ctest BUILD_DIR CTEST_ARGS...
  (cd "$1" && shift && ctest --output-on-failure -j "$JOBS" "$@")
}
# run_ctest with the sanitizers' options: leaks reported, any UB report fatal with its stack.
sanitized_ctest() {
  (export ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
   run_ctest "$@")
}

# With the sanitizer build (SANITIZE=1) each unit test runs once: the main build
# keeps the unit tests labelled platform (the CPU kernels with this build's BLAS,
# ISA paths and threads; tests that read a GPULEDGER_HAVE_* switch) and the
# CLI, MPI, GPU and install tests; the other unit tests run under the sanitizers.
# The main configuration is scripts/main_config.sh, shared with scripts/demo.sh:
# after the demo, this build only adds the tests.
. "$ROOT/scripts/main_config.sh"
timed "main build" env BUILD_DIR="$BUILD_DIR" PROGRESS=1 "$ROOT/scripts/build.sh" "${MAIN_CONFIG[@]}"
timed "main tests" run_ctest "$BUILD_DIR" "$@"

if [ "$SANITIZE" = "1" ]; then
  timed "minimal sanitizer build (no MPI, no BLAS, no CUDA; ASan + UBSan)" env BUILD_DIR="$MINIMAL_BUILD_DIR" PROGRESS=1 \
    "$ROOT/scripts/build.sh" -DGPULEDGER_WERROR=ON -DGPULEDGER_MPI=OFF -DGPULEDGER_BLAS=OFF -DGPULEDGER_CUDA=OFF \
    -DGPULEDGER_BUILD_BENCH=OFF -DGPULEDGER_SANITIZE=ON -DGPULEDGER_CLI_TESTS=OFF \
    -DGPULEDGER_GENERIC_UNIT_TESTS=ON
  timed "minimal sanitizer unit tests and bad inputs" sanitized_ctest "$MINIMAL_BUILD_DIR" -L unit
  if [ "$FUZZ_SECONDS" != "0" ]; then
    timed "fuzz build (clang, libFuzzer)" "$ROOT/scripts/fuzz.sh" build
    timed "fuzz runs (${FUZZ_SECONDS} s each)" "$ROOT/scripts/fuzz.sh" run "$FUZZ_SECONDS"
  fi
else
  # SANITIZE=0: the plain minimal build; the bad-input corpus and the CLI tests ran in the main build above.
  timed "minimal build (no MPI, no BLAS, no CUDA)" env BUILD_DIR="$MINIMAL_BUILD_DIR" PROGRESS=1 "$ROOT/scripts/build.sh" \
    -DGPULEDGER_WERROR=ON -DGPULEDGER_MPI=OFF -DGPULEDGER_BLAS=OFF -DGPULEDGER_CUDA=OFF -DGPULEDGER_BUILD_BENCH=OFF \
    -DGPULEDGER_SANITIZE=OFF -DGPULEDGER_CLI_TESTS=OFF
  timed "minimal unit tests" run_ctest "$MINIMAL_BUILD_DIR" -L unit -LE bad_inputs
fi

if [ "$format_failed" = 1 ]; then
  echo "test.sh: every test passed, but the format check failed (see above)" >&2
  exit 1
fi
echo "test.sh: all passed"
