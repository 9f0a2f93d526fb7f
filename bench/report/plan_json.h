// The plan record as report JSON (docs/report.md): the document of `gpuledger
// plan`, and one rank's analytic section, which train puts under ranks[i] too.
#pragma once
#include <nlohmann/json.hpp>

#include "bench/record/plan_record.h"

namespace gpuledger::report {

// {"rank", "coords", "role", "params", "in_flight_microbatches",
//  "analytic": {"exact", "published", "comm"}, "flops": {...}, ["device_bytes", "fits", "headroom_bytes"]}
nlohmann::json plan_rank_json(const run::PlanRankRecord& r);
// The inverse, for the figures plan_rank_json writes (a train rank's record,
// sent to rank 0 of an MPI job, carries its analytic section in this form).
run::PlanRankRecord plan_rank_from_json(const nlohmann::json& j);
nlohmann::json plan_report_json(const run::PlanRecord& record);

}  // namespace gpuledger::report
