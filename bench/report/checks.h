// Measured-vs-analytic checks: each is {name, rank, measured, expected,
// rel_err, tol, ok}. Exact accounts must match to the byte (tol 0); the
// workspace is checked against its upper bound; executed FLOPs must equal the
// analytic hardware FLOPs.
#pragma once
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "bench/report/report_reader.h"

namespace gpuledger::bench {

nlohmann::json make_check(const std::string& name, int64_t rank, double measured, double expected, double tol);
// measured <= bound ("≤" checks); rel_err is (measured − bound) / bound.
nlohmann::json make_bound_check(const std::string& name, int64_t rank, double measured, double bound);

// The checks of one rank's train/infer record: every account but workspace
// exact (measured peak == analytic exact), workspace ≤ its bound, executed
// FLOPs per step == analytic hardware FLOPs. `rank_json` holds "measured",
// "analytic" and "flops" as the report schema says; it may come from a file
// (a missing or mistyped field is a ReportFormatError naming its path).
nlohmann::json rank_checks(const report::JsonView& rank_json);

// True when every check in the array passed.
bool all_ok(const nlohmann::json& checks);

}  // namespace gpuledger::bench
