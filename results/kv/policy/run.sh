#!/usr/bin/env bash
# The output error of a KV budget against a full cache, per policy, on tiny-llama
# (random weights): 4 requests of 48 + 80 tokens under a budget of 64 tokens.
# Writes <policy>.json and run.log here. Usage: results/kv/policy/run.sh [GPULEDGER]
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
BIN="${1:-$HERE/../../../build/bench/gpuledger}"
: >"$HERE/run.log"
for policy in window sink h2o; do
  cmd=("$BIN" infer --model tiny-llama --device-memory 64Mi --requests 4 --prompt-len 48 --gen-len 80
       --kv-policy "$policy" --kv-budget 64 --json "$HERE/$policy.json")
  echo "\$ ${cmd[*]}" | sed -e "s|$BIN|gpuledger|" -e "s|$HERE/|results/kv/policy/|" >>"$HERE/run.log"
  "${cmd[@]}" | grep -E "^# KV policy|checks," >>"$HERE/run.log"
done
cat "$HERE/run.log"
