// `infer` as a typed run: a request (the resolved configuration, the cache,
// the requests to serve, the serving memory rule) → run_infer → a record of
// what serving measured (bench/report/infer_json.h writes it as the report,
// kind "infer").
// The request and record types: bench/record/infer_record.h.
//
// Steps (vLLM's start-up, then serving):
//   1. weights (deterministic init, no checkpoint), booked in `weights`;
//   2. one profiling prefill of --prefill-chunk tokens: its workspace peak;
//   3. pool = ⌊utilization × memory⌋ − weights − that peak − --overhead;
//   4. capacity: a cache of that pool filled with --context-token sequences
//      until admission fails (the same cache code on a bookkeeping device, so
//      the serving cache's peaks stay its own);
//   5. the engine serves the requests.
// The analytic side (analytic/kv_cache.h) is called here only for the
// report's "analytic" section and the checks — never by the engine.
// Tensor parallelism: `mpirun -np N gpuledger infer --tp N` (dp = pp = 1;
// other layouts are refused, exit 2). Every rank builds its slice of the
// model and its own KV pool on its own device, and runs the same engine
// schedule (the same pool on every rank: the smallest, agreed by an
// all-reduce, so admission and preemption agree). Rank 0 gathers every
// rank's record and reports.
#pragma once
#include "bench/record/infer_record.h"

namespace gpuledger::run {

// Runs on one rank, or as a rank of an MPI job when the layout has tp > 1.
InferRecord run_infer(const InferRequest& request);

}  // namespace gpuledger::run
