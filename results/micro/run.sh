#!/usr/bin/env bash
# The recorded gpl_micro run of results/micro/ (see results/README.md, "Microbenchmarks"):
# every per-op benchmark at the shapes of one llama2-7b layer (seq 1024, mbs 1, fp32),
# AdamW and the gradient norm over that 1-layer model's 464,531,456 parameters,
# the KV ops and conversions at their defaults, and the ledger's own cost;
# 3 repetitions each, JSON kept. The load before and after goes to load-micro.txt.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/../.." && pwd)"
BIN="${BUILD_DIR:-$ROOT/build}/bench/micro/gpl_micro"
OUT="$ROOT/results/micro"
uptime > "$OUT/load-micro.txt"
OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=2 "$BIN" --gpl_backends=cpu --gpl_presets=llama2-7b --gpl_seqs=1024 \
  --gpl_dtypes=fp32 --gpl_adamw_params=464531456 --gpl_kv_contexts=1024,4096 --gpl_peak=measure \
  '--benchmark_filter=^(gemm|attention|softmax|norm|rope|cross_entropy|adamw|grad_norm|elementwise|kv_cache_write|cached_attention|convert|ledger)/' \
  --benchmark_repetitions=3 --benchmark_min_time=0.2 \
  --benchmark_out="$OUT/llama2-7b-1l-fp32.json" --benchmark_out_format=json | tee "$OUT/llama2-7b-1l-fp32.txt"
uptime >> "$OUT/load-micro.txt"
