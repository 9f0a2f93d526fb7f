// The measuring part of an infer run on one rank (bench/run/infer_run.h):
// weights, profiled activation peak, the pool rule, the capacity filled on a
// bookkeeping twin, the engine serving the requests, and the KV dtype's
// attention error; written into the rank's record, the checks and the summary.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/run/infer_run.h"
#include "comm/comm.h"
#include "kernels/device.h"

namespace gpuledger::run {

// What decode throughput is taken against.
struct InferPeaks {
  std::optional<double> flops, bandwidth;
  std::string flops_source, bandwidth_source;
};

struct ServingRank {
  Device& device;
  Ledger& ledger;
  Comm& tp;
  int64_t rank_id = 0;
  const InferPeaks& peaks;
};

// Fills rank (its record), doc["ranks"], doc["checks"] and doc["summary"].
// Throws OutOfMemory when the pool has no room or serving runs out.
void serve_and_measure(const InferRequest& q, const ServingRank& s, nlohmann::json& rank, nlohmann::json& doc);

}  // namespace gpuledger::run
