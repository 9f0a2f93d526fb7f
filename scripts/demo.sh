#!/usr/bin/env bash
# The main job on a fresh machine: set up, build, then run gpuledger on real
# models and write one report per point under results/demo/:
#   - plan: the per-rank budget of llama3-70b on 256 H100s (the README's example)
#     and of llama2-7b under each ZeRO stage;
#   - kv: KV bytes, capacity and decode roofline of llama3-8b and qwen2.5-7b;
#   - train: real CPU training steps of small models, the ledger beside the budget.
set -euo pipefail
ROOT="$(cd "$(dirname "$0")/.." && pwd)"
"$ROOT/scripts/setup.sh"
# Only the binary the demo runs, in the main configuration that scripts/test.sh
# uses too (scripts/main_config.sh), so the test command reuses this build.
. "$ROOT/scripts/main_config.sh"
if [ ! -x "${BUILD_DIR:-$ROOT/build}/bench/gpuledger" ]; then
  echo "demo: building gpuledger into ${BUILD_DIR:-build} — the first build takes 3 to 10 minutes on 2 cores, by the CPU" \
       "(ccache makes later ones fast)"
fi
t0=$SECONDS
BUILD_DIR="${BUILD_DIR:-$ROOT/build}" TARGETS=gpuledger PROGRESS=1 "$ROOT/scripts/build.sh" "${MAIN_CONFIG[@]}"
echo "demo: gpuledger built in $((SECONDS - t0)) s"
GL="${BUILD_DIR:-$ROOT/build}/bench/gpuledger"
OUT="$ROOT/results/demo"
mkdir -p "$OUT"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export OMPI_MCA_rmaps_base_oversubscribe=1 OMPI_MCA_btl=self,vader OMPI_MCA_pml=ob1

run() {  # run NAME ARGS...: prints the table, writes $OUT/NAME.json
  local name=$1; shift
  echo "================ gpuledger $* ================"
  "$GL" "$@" --json "$OUT/$name.json"
  echo
}

run plan-llama3-70b-256xh100 plan --model llama3-70b --dp 8 --tp 8 --pp 4 --zero 1 --seq 8192 --mbs 1 \
    --microbatches 32 --recompute selective --device h100-sxm
for z in 0 1 2 3; do
  run "plan-llama2-7b-dp8-zero$z" plan --model llama2-7b --dp 8 --zero "$z" --seq 4096 --mbs 1 \
      --microbatches 4 --recompute selective --attention flash --device a100-80gb
done
run kv-llama3-8b-h100 kv --model llama3-8b --device h100-sxm --context 8192 --kv paged
run kv-qwen2.5-7b-h200-fp8 kv --model qwen2.5-7b --device h200 --context 32768 --kv paged --kv-dtype fp8
# One rank: real CPU training of small models, the ledger beside the budget.
run train-small-gpt-cpu train --model small-gpt --backend cpu --seq 128 --mbs 4 --microbatches 2 --steps 6
run train-small-llama-cpu train --model small-llama --backend cpu --seq 128 --mbs 4 --microbatches 2 \
    --recompute selective --attention flash --steps 6

# Four ranks (mpirun, CPU): a gpt2-shaped model (GPT-2 small's layer and vocabulary, 4 layers) in each
# layout; every rank's bytes and communication are checked against the budget.
export OMP_NUM_THREADS=1 OPENBLAS_NUM_THREADS=1
GPT2="--model gpt2 --layers 4 --seq 128 --gbs 8 --mbs 2 --steps 3 --warmup 1"
mpi() { local name=$1; shift; echo "================ mpirun -np 4 gpuledger $* ================"
        mpirun -np 4 --oversubscribe "$GL" "$@" --json "$OUT/$name.json"; echo; }
mpi train-gpt2-4l-dp4 train $GPT2 --dp 4
mpi train-gpt2-4l-tp2-dp2-sp train $GPT2 --tp 2 --dp 2 --sp
mpi train-gpt2-4l-pp2-dp2-1f1b train $GPT2 --pp 2 --dp 2 --schedule 1f1b --timeline
# ZeRO 1: the gradients reduce-scattered into each rank's shard, then the updated weights all-gathered.
mpi train-gpt2-4l-dp4-zero1 train $GPT2 --dp 4 --zero 1
# ZeRO 3 on the tied gpt2 (one stage: the head's word gradient waits in a side buffer for the embedding's).
mpi train-gpt2-4l-dp4-zero3 train $GPT2 --dp 4 --zero 3

# Inference on the CPU: a paged KV cache, the pool, capacity and bandwidth beside the kv budget.
run infer-small-llama-paged infer --model small-llama --device-memory 2Gi --requests 16 --prompt-len 64 \
    --gen-len 32 --max-batch 8 --kv paged
# Figures (scripts/plot.py, matplotlib): the train points' bytes and MFU, and for each report its
# ranks (the pipeline's two stages differ) and, for the run with --timeline, its step's memory.
if /usr/bin/python3 -c "import matplotlib" 2>/dev/null; then
  /usr/bin/python3 "$ROOT/scripts/plot.py" "$OUT"/train-*.json --out "$OUT/plots"
fi
echo "reports written under $OUT"
