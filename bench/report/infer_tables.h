// Human tables for `gpuledger infer`, rendered from its report document: the
// KV figures (pool, assigned and token bytes at their peaks, waste), capacity
// measured vs predicted, throughput (prefill and decode apart), decode bytes
// per step and bandwidth utilization beside MFU, the KV dtype's attention
// error, and the checks.
#pragma once
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

void print_infer_summary(std::ostream& os, const nlohmann::json& doc);

}  // namespace gpuledger::report
