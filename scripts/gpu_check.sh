#!/usr/bin/env bash
# The one prepared GPU check: on a machine with NVIDIA GPUs and CUDA 13 it runs
# the CUDA-vs-CPU op tests, `gpuledger peak`, two `gpuledger train` runs of a
# 4-layer llama3-8b (seq 4096, bf16, flash attention, recompute none and
# selective) and, when the binary has it, `gpuledger infer` with a paged cache.
# Every report and log goes into OUTDIR, with summary.txt listing each step's
# status and time; the whole run stays under 8 minutes (each step has a
# timeout, and a step that no longer fits is skipped and says so).
#
# Usage
#   scripts/gpu_check.sh --prepare DIR [CUDA_ARCHS]   on a build machine (CUDA 13 + our build deps,
#                                                      e.g. the CI machine): build the binaries into DIR
#   scripts/gpu_check.sh OUTDIR [DIR]                 on the GPU machine: run the checks with DIR's
#                                                      binaries (default: build-gpucheck, if present)
#   scripts/gpu_check.sh OUTDIR --build               on the GPU machine: build from source first
# Environment: GPU_CHECK_DEVICE (device preset for peaks and the infer memory
# size; default h200), GPU_CHECK_BUDGET_S (default 470 s).
# Typical use: prepare into build-gpucheck (ignored by git), copy it to the GPU
# machine with the source tree, and run there
#   scripts/gpu_check.sh OUTDIR build-gpucheck
#
# Why a prepared binary tree (the choice this script makes)
#   The GPU machine has the driver and CUDA 13 but none of our other build
#   dependencies, and our CMake requires nlohmann-json, CLI11, fmt and
#   GoogleTest. Building there would also spend the GPU machine's time on a
#   2-architecture nvcc build. So the binaries are built beforehand, on a
#   machine that has every dependency, into an ignored folder that is copied
#   to the GPU machine beside the source tree. The
#   prepared tree is configured without MPI and without BLAS (single rank, the
#   CPU reference uses the built-in GEMM), for one architecture (default 90:
#   H100/H200) to keep it small. At run time the binaries need, besides glibc
#   and libstdc++: the CUDA 13 runtime and cuBLAS/cuBLASLt (taken from the GPU
#   machine's CUDA: same soname major, so the local libraries are used and
#   nothing large is carried), and libfmt and libgomp, which are copied into
#   DIR/lib and found through LD_LIBRARY_PATH (GoogleTest is linked
#   statically; nlohmann-json and CLI11 are header-only). The script checks
#   with ldd that nothing is missing before running anything.
#   --build is the fallback for a GPU machine that does carry the build
#   dependencies (e.g. through CMAKE_PREFIX_PATH); it costs GPU-machine time.
set -uo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"

# ---------------------------------------------------------------- prepare ----
if [ "${1:-}" = "--prepare" ]; then
  set -e
  DIR="${2:?usage: gpu_check.sh --prepare DIR [CUDA_ARCHS]}"
  ARCHS="${3:-90}"
  case "$DIR" in /*) ;; *) DIR="$ROOT/$DIR" ;; esac
  BUILD="$DIR/build"
  cmake -S "$ROOT" -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPULEDGER_CUDA=ON \
    -DGPULEDGER_MPI=OFF -DGPULEDGER_BLAS=OFF -DGPULEDGER_BUILD_BENCH=OFF \
    -DCMAKE_CUDA_ARCHITECTURES="$ARCHS" >/dev/null
  cmake --build "$BUILD" -j "${JOBS:-$(nproc)}" --target gpuledger test_backend_ops
  mkdir -p "$DIR/bin" "$DIR/lib"
  cp "$BUILD/bench/gpuledger" "$BUILD/tests/gpu/test_backend_ops" "$DIR/bin/"
  strip --strip-debug "$DIR/bin/"* || true
  # Shared libraries outside glibc, libstdc++/libgcc and CUDA: copy them (e.g. libfmt, libgomp).
  for bin in "$DIR/bin/"*; do
    ldd "$bin" | awk '/=> \//{print $3}'
  done | sort -u | while read -r lib; do
    case "$(basename "$lib")" in
      libc.so*|libm.so*|libdl.so*|librt.so*|libpthread.so*|ld-linux*|libstdc++.so*|libgcc_s.so*) ;;
      libcudart.so*|libcublas.so*|libcublasLt.so*|libcuda.so*|libnccl.so*) ;;
      *) cp -L "$lib" "$DIR/lib/" ;;
    esac
  done
  rm -rf "$BUILD"  # only bin/ and lib/ travel
  {
    echo "prepared $(date -u +%FT%TZ) from $(git -C "$ROOT" describe --always --dirty 2>/dev/null || echo unknown)"
    echo "CUDA architectures: $ARCHS"
    ls -l "$DIR/bin" "$DIR/lib"
  } > "$DIR/MANIFEST"
  du -sh "$DIR"
  exit 0
fi

# -------------------------------------------------------------------- run ----
OUT="${1:?usage: gpu_check.sh OUTDIR [DIR | --build]}"
mkdir -p "$OUT"
OUT="$(cd "$OUT" && pwd)"
SUMMARY="$OUT/summary.txt"
: > "$SUMMARY"
START=$(date +%s)
BUDGET_S=${GPU_CHECK_BUDGET_S:-470}   # 8 minutes less a margin for the machine's own overhead
FAILED=0

say() { echo "$*" | tee -a "$SUMMARY"; }

# step NAME TIMEOUT_S CMD...: runs CMD with stdout+stderr into OUT/NAME.log, at most
# TIMEOUT_S seconds and never past the budget; records status and time.
step() {
  local name="$1" limit="$2"
  shift 2
  local left=$((BUDGET_S - ($(date +%s) - START)))
  if [ "$left" -lt 20 ]; then
    say "SKIP  $name (only ${left}s of the budget left)"
    return 0
  fi
  [ "$limit" -gt "$left" ] && limit=$left
  local t0 rc dt
  t0=$(date +%s)
  timeout --kill-after=5 "$limit" "$@" > "$OUT/$name.log" 2>&1
  rc=$?
  dt=$(($(date +%s) - t0))
  case $rc in
    0) say "OK    $name (${dt}s)" ;;
    77) say "FAIL  $name (exit 77: it found no usable GPU; see $name.log)" ; FAILED=1 ;;
    124|137) say "FAIL  $name (timed out after ${limit}s)" ; FAILED=1 ;;
    *) say "FAIL  $name (exit $rc, ${dt}s; see $name.log)" ; FAILED=1 ;;
  esac
  return 0
}

# ---- the binaries ----
if [ "${2:-}" = "--build" ]; then
  BIN="$ROOT/build-gpucheck-src"
  step build 300 bash -c "cmake -S '$ROOT' -B '$BIN' -G Ninja -DCMAKE_BUILD_TYPE=Release -DGPULEDGER_CUDA=ON \
    -DGPULEDGER_MPI=OFF -DGPULEDGER_BLAS=OFF -DGPULEDGER_BUILD_BENCH=OFF -DCMAKE_CUDA_ARCHITECTURES=native && \
    cmake --build '$BIN' -j \$(nproc) --target gpuledger test_backend_ops"
  GPULEDGER="$BIN/bench/gpuledger"
  BACKEND_TEST="$BIN/tests/gpu/test_backend_ops"
else
  DIR="${2:-$ROOT/build-gpucheck}"
  case "$DIR" in /*) ;; *) DIR="$ROOT/$DIR" ;; esac
  GPULEDGER="$DIR/bin/gpuledger"
  BACKEND_TEST="$DIR/bin/test_backend_ops"
  export LD_LIBRARY_PATH="$DIR/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
  [ -f "$DIR/MANIFEST" ] && cp "$DIR/MANIFEST" "$OUT/MANIFEST"
fi
for d in /usr/local/cuda/lib64 /usr/local/cuda/targets/x86_64-linux/lib; do
  [ -d "$d" ] && export LD_LIBRARY_PATH="$LD_LIBRARY_PATH:$d"
done

# ---- the machine ----
{
  echo "date: $(date -u +%FT%TZ)"
  echo "host: $(hostname)"
  command -v nvidia-smi >/dev/null && nvidia-smi || echo "nvidia-smi: not found"
  command -v nvcc >/dev/null && nvcc --version || echo "nvcc: not on PATH"
  echo "LD_LIBRARY_PATH=$LD_LIBRARY_PATH"
  for b in "$GPULEDGER" "$BACKEND_TEST"; do echo "== ldd $b"; ldd "$b" 2>&1; done
} > "$OUT/environment.txt" 2>&1
say "gpu_check $(date -u +%FT%TZ) on $(hostname); reports in $OUT"
for b in "$GPULEDGER" "$BACKEND_TEST"; do
  if [ ! -x "$b" ]; then
    say "FAIL  missing binary $b (run scripts/gpu_check.sh --prepare on a build machine, or pass --build)"
    exit 1
  fi
  if ldd "$b" | grep -q "not found"; then
    say "FAIL  $b: missing shared libraries (see environment.txt)"
    exit 1
  fi
done

# ---- the checks ----
step test_backend_ops 120 "$BACKEND_TEST" --gtest_output="xml:$OUT/test_backend_ops.xml"
step peak 60 "$GPULEDGER" peak --backend cuda --json "$OUT/peak.json"
# The device preset the reports take peaks (MFU) and, for infer, the memory size from.
DEVICE="${GPU_CHECK_DEVICE:-h200}"
TRAIN=(train --backend cuda --model llama3-8b --layers 4 --seq 4096 --mbs 1 --dtype bf16
       --attention flash --steps 3 --warmup 1 --device "$DEVICE")
step train_recompute_none 110 "$GPULEDGER" "${TRAIN[@]}" --recompute none --json "$OUT/train_recompute_none.json"
step train_recompute_selective 110 "$GPULEDGER" "${TRAIN[@]}" --recompute selective \
  --json "$OUT/train_recompute_selective.json"
# (`gpuledger infer --help` exits 0 even without the subcommand: CLI11 prints the
# root help then; so look for it in the list of subcommands.)
if "$GPULEDGER" --help 2>/dev/null | grep -qE '^[[:space:]]+infer[[:space:]]'; then
  step infer_paged 60 "$GPULEDGER" infer --backend cuda --model llama3-8b --layers 4 --kv paged \
    --requests 8 --prompt-len 1024 --gen-len 64 --device "$DEVICE" --json "$OUT/infer_paged.json"
else
  say "SKIP  infer_paged (this gpuledger has no infer subcommand)"
fi

say "total $(($(date +%s) - START))s; $([ $FAILED = 0 ] && echo 'all steps passed' || echo 'some steps FAILED')"
exit $FAILED
