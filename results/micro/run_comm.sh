#!/usr/bin/env bash
# The recorded gpl_micro_comm run of results/micro/: 2 MPI ranks on this machine
# (shared memory, Open MPI's vader BTL), 8 B … 32 MiB by ×2 (the default sweep
# stops at 1 GiB; cut here because on this loaded 2-core machine a 128 MiB
# all-reduce took 0.5–1 s per call), 10 timed and 2 warm-up iterations per
# size, fp32 and bf16, in and out of place.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bench/micro/gpl_micro_comm"
OUT="$ROOT/results/micro"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
uptime > "$OUT/load-comm.txt"
mpirun -np 2 --oversubscribe --mca btl self,vader "$BIN" --gpl_max_bytes=32M --gpl_iters=10 --gpl_warmup_iters=2 \
  --benchmark_out="$OUT/comm-mpi-2ranks.json" --benchmark_out_format=json --benchmark_color=false | tee "$OUT/comm-mpi-2ranks.txt"
uptime >> "$OUT/load-comm.txt"
