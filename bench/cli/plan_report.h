// The plan report: the analytic section of a rank (shared with train/infer,
// which put the same object under ranks[i].analytic) and the human tables
// rendered from the JSON document.
#pragma once
#include <cstdint>
#include <optional>
#include <ostream>

#include <nlohmann/json.hpp>

#include "bench/cli/options.h"

namespace gpuledger::cli {

// {"rank", "coords", "role", "params", "in_flight_microbatches",
//  "analytic": {"exact", "published", "comm"}, "flops": {...}, ["fits", "headroom_bytes"]}
nlohmann::json plan_rank_json(const Resolved& r, int64_t rank, std::optional<int64_t> device_bytes);
// FLOPs per step, bubble, peak and its source, time estimates.
nlohmann::json plan_summary_json(const Resolved& r, const Options& o);

// The resolved configuration (model, layout, run, device) as a few '#' lines.
void print_config_header(std::ostream& os, const nlohmann::json& doc);
// The whole plan: config header, accounts per role, published figures, comm, FLOPs/time.
void print_plan(std::ostream& os, const nlohmann::json& doc);

}  // namespace gpuledger::cli
