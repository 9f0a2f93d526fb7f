// `plan` as a typed run: a request (the resolved configuration, the ranks to
// report, the training-time estimate's inputs) → run_plan → a record of what
// the analytic side computes per rank role and for the job. Nothing is
// allocated; see docs/exact-budget.md and docs/formulas/ for every figure.
// The request and record types: bench/record/plan_record.h.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "bench/record/plan_record.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

PlanRankRecord plan_rank(const ResolvedConfig& c, int64_t rank, std::optional<int64_t> device_bytes);
// A rank's role as reports name it: "r<rank> pp<stage>", "first"/"last" when pp > 1.
std::string role_name(const Layout& l, int64_t rank);
PlanRecord run_plan(const PlanRequest& request);

}  // namespace gpuledger::run
