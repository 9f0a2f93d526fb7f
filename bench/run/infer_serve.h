// The measuring part of an infer run on one rank (bench/run/infer_run.h):
// weights, profiled activation peak, the pool rule, the capacity filled on a
// bookkeeping twin, the engine serving the requests, and the KV dtype's
// attention error; written into the record: the rank's, its checks, the serving figures.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "bench/run/infer_run.h"
#include "comm/comm.h"
#include "kernels/device.h"

namespace gpuledger::run {

struct ServingRank {
  Device& device;
  Ledger& ledger;
  Comm& tp;
  int64_t rank_id = 0;
  const InferPeaks& peaks;
};

// Fills record.ranks (this rank's alone), record.checks and record.serving.
// Throws OutOfMemory when the pool has no room or serving runs out.
void serve_and_measure(const InferRequest& q, const ServingRank& s, InferRecord& record);

}  // namespace gpuledger::run
