#!/usr/bin/env bash
# The CPU training benchmark: a llama2-7b-shaped model cut to 2 layers (seq 1024, mbs 1)
# trained on this machine's CPU, MFU against the fp32 sgemm peak measured in the
# same run (by `gpuledger peak` here, and again by train itself at start),
# in fp32 and bf16, with the per-op breakdown (--profile). Writes
# results/cpu/*.json and prints the figures. Run on a quiet machine.
#   scripts/bench_cpu_train.sh [STEPS]     (default 4: 1 warm-up + 3 timed)
#   DTYPES="fp32" runs one dtype (default "fp32 bf16"); the summary reads the reports present.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
# GPULEDGER_BIN: a gpuledger already built (nothing is built then); else scripts/build.sh builds all.
if [ -n "${GPULEDGER_BIN:-}" ]; then
  GL="$GPULEDGER_BIN"
else
  BUILD_DIR="${BUILD_DIR:-$ROOT/build}" "$ROOT/scripts/build.sh" >/dev/null
  GL="${BUILD_DIR:-$ROOT/build}/bench/gpuledger"
fi
OUT="$ROOT/results/cpu"
STEPS="${1:-4}"
mkdir -p "$OUT"
echo "# $(date -u +%FT%TZ) on $(hostname): $(nproc) cores, $(grep -m1 'model name' /proc/cpuinfo | cut -d: -f2 | xargs)"
echo "# threads: OMP_NUM_THREADS=${OMP_NUM_THREADS:-unset} OPENBLAS_NUM_THREADS=${OPENBLAS_NUM_THREADS:-unset}; load: $(uptime)"
"$GL" peak --backend cpu --dtypes fp32,bf16 --reps 5 --json "$OUT/peak.json"
for dt in ${DTYPES:-fp32 bf16}; do
  "$GL" train --model llama2-7b --layers 2 --seq 1024 --mbs 1 --dtype "$dt" --steps "$STEPS" --warmup 1 \
      --profile --json "$OUT/train-llama2-7b-2l-$dt.json"
done
echo "# load at the end: $(uptime)"
python3 - "$OUT" <<'PY'
import json, sys, pathlib
out = pathlib.Path(sys.argv[1])
peak = json.load(open(out / "peak.json"))["summary"]
print(f"peak (gpuledger peak): fp32 {peak['peak_flops_fp32']/1e9:.1f} GFLOP/s, bf16 {peak['peak_flops_bf16']/1e9:.1f} GFLOP/s")
for dt in ("fp32", "bf16"):
    if not (out / f"train-llama2-7b-2l-{dt}.json").exists():
        continue
    d = json.load(open(out / f"train-llama2-7b-2l-{dt}.json"))
    s = d["summary"]
    print(f"{dt}: median step {s['median_step_ms']/1e3:.2f} s, {s['tokens_per_s']:.1f} tokens/s, "
          f"MFU {100*s['mfu']:.1f}% HFU {100*s['hfu']:.1f}% of {s['peak_flops']/1e9:.1f} GFLOP/s "
          f"(train's own measurement); vs gpuledger peak {dt}: "
          f"{100*s['model_flops_per_step']/(s['median_step_ms']/1e3)/peak['peak_flops_' + dt]:.1f}%")
    ops = sorted(d["ranks"][0]["op_time"].items(), key=lambda kv: -kv[1]["seconds"])[:6]
    print("   top ops: " + ", ".join(f"{k} {100*v['share']:.1f}%" for k, v in ops))
PY
