// `infer` as a typed run: a request (the resolved configuration, the cache,
// the requests to serve, the serving memory rule) → run_infer → the rank's
// measurements as the report document (kind "infer").
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
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "analytic/kv_cache.h"
#include "core/resolved_config.h"
#include "models/transformer/infer_engine.h"

namespace gpuledger::run {

struct InferRequest {
  ResolvedConfig config;                 // device memory required
  std::string backend = "cpu";           // cpu | meta | cuda
  analytic::KvOptions kv;
  std::vector<RequestShape> shapes;      // the requests served
  int64_t prompt_len = 0, gen_len = 0;   // as given (the report shows them)
  std::string trace;                     // the trace file they came from, if any
  int64_t context = 0;                   // tokens per sequence of the capacity
  int64_t max_batch = 256;
  int64_t prefill_chunk = 2048;          // for a gpt model, at most its max_seq
  int64_t prefix_len = 0;
  int64_t kv_outliers = 0;
  double memory_utilization = 0.9;
  int64_t overhead_bytes = 0;
  std::optional<double> peak_flops;
};

struct InferRecord {
  nlohmann::json report;                 // the report document (rank 0 of an MPI job)
  std::optional<int> exit_without_report;   // an MPI rank other than 0
};

// Runs on one rank, or as a rank of an MPI job when the layout has tp > 1.
InferRecord run_infer(const InferRequest& request);

}  // namespace gpuledger::run
