// What `gpuledger check` trusts nothing of: from a train report's "config"
// section alone, this binary re-derives every rank's analytic block with the
// function train itself uses (run::plan_rank), and checks
//   - each figure the report's analytic block states (exact bytes by account,
//     their total, comm calls and bytes, analytic FLOPs) against the
//     re-derived one: "rederive.<path>" checks, named by the row that differs;
//   - the measurement against the re-derived budget (bench::rank_checks on
//     the rank with its analytic block replaced): an edited measurement with
//     an edited budget, or an edited config, fails here;
//   - the measured total peak against the accounts as the report defines it:
//     peak_bytes == Σ at_peak (the breakdown at that moment), and no account's
//     own peak above the total peak: "total.*" checks.
// An infer report's analytic figures (weights, full KV cache, KV bytes per
// token) are re-derived with the analytic functions infer uses.
#pragma once
#include <nlohmann/json.hpp>

#include "bench/report/report_reader.h"
#include "core/resolved_config.h"

namespace gpuledger::run {

// The configuration a report's "config" section states (model, layout, run).
// Throws report::ReportFormatError (a missing or mistyped field, named by its
// JSON path), ConfigError or LayoutError (a config this binary refuses): all
// exit 2.
ResolvedConfig config_from_report(const report::JsonView& config);

// All checks of a train or infer report (`doc` is its root), in the order above.
nlohmann::json rederived_checks(const report::JsonView& doc);

}  // namespace gpuledger::run
