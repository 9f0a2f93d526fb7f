// `plan` as a typed run: a request (the resolved configuration, the ranks to
// report, the training-time estimate's inputs) → run_plan → a record of what
// the analytic side computes per rank role and for the job. Nothing is
// allocated; see docs/exact-budget.md and docs/formulas/ for every figure.
// The request and record types: bench/record/plan_record.h.
#pragma once
#include <cstdint>
#include <optional>

#include "bench/record/plan_record.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

PlanRankRecord plan_rank(const ResolvedConfig& c, int64_t rank, std::optional<int64_t> device_bytes);
PlanRecord run_plan(const PlanRequest& request);

}  // namespace gpuledger::run
