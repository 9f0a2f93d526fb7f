// The plan record as report JSON (docs/report.md): the document of `gpuledger
// plan`, and one rank's analytic section, which train puts under ranks[i] too.
#pragma once
#include <nlohmann/json.hpp>

#include "bench/run/plan_run.h"

namespace gpuledger::report {

// {"rank", "coords", "role", "params", "in_flight_microbatches",
//  "analytic": {"exact", "published", "comm"}, "flops": {...}, ["device_bytes", "fits", "headroom_bytes"]}
nlohmann::json plan_rank_json(const run::PlanRankRecord& r);
nlohmann::json plan_report_json(const run::PlanRecord& record);

}  // namespace gpuledger::report
