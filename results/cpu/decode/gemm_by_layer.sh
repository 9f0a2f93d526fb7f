#!/usr/bin/env bash
# Where a decode step's time goes, by timers: the forward GEMMs of one
# llama3-8b layer (qkv, o, gate, up, down) and the LM head through gpl_micro
# (bf16, the cpu backend's skinny route) at 1, 8 and 16 tokens, medians of 3
# repetitions, for each binary given, one binary after the other. A step of llama3-8b-2l.json runs 2 layers' GEMMs and
# one LM head: their sum beside the step time of run.sh's reports.
#
# Usage: results/cpu/decode/gemm_by_layer.sh DIR...   (each DIR holds a gpl_micro)
# Threads: OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
OUT="$HERE/out"
mkdir -p "$OUT"
export OMP_NUM_THREADS=2 OPENBLAS_NUM_THREADS=1
export GPULEDGER_PRESETS="$HERE/../../../models/presets"
echo "# $(date -u +%FT%TZ) gemm_by_layer; load: $(uptime | sed 's/.*load average: //')"
i=0
for dir in "$@"; do
  i=$((i + 1))
  "$dir/gpl_micro" --gpl_backends=cpu --gpl_presets=llama3-8b --gpl_seqs=1,8,16 --gpl_dtypes=bf16 --gpl_peak=none \
    --benchmark_filter='gemm/cpu/llama3-8b/(qkv|o|gate|up|down|lm_head)/fwd/bf16/' \
    --benchmark_repetitions=3 --benchmark_report_aggregates_only=true \
    --benchmark_format=json --benchmark_out="$OUT/gemm-by-layer-$i.json" >/dev/null
done
echo "# load at the end: $(uptime | sed 's/.*load average: //')"
python3 - "$OUT" "$@" <<'PY'
import json, re, sys, pathlib
out, dirs = pathlib.Path(sys.argv[1]), sys.argv[2:]
runs = []
for i, d in enumerate(dirs, 1):
    b = json.load(open(out / f"gemm-by-layer-{i}.json"))["benchmarks"]
    runs.append({x["run_name"]: x["real_time"] for x in b if x.get("aggregate_name") == "median"})
print(f"{'gemm (median ms)':<44}" + "".join(f"{pathlib.Path(d).name:>16}" for d in dirs))
for name in sorted(runs[0]):
    print(f"{name.replace('/manual_time', ''):<44}" + "".join(f"{r[name]:>16.2f}" for r in runs))
for seq in (1, 8, 16):
    tot = []
    for r in runs:
        layer = sum(v for k, v in r.items() if re.search(rf"/(qkv|o|gate|up|down)/fwd/bf16/seq:{seq}/", k))
        head = sum(v for k, v in r.items() if re.search(rf"/lm_head/fwd/bf16/seq:{seq}/", k))
        tot.append(2 * layer + head)
    print(f"step GEMMs at {seq:>2} tokens (2 layers + LM head), ms" + "".join(f"{t:>16.1f}" for t in tot))
PY
