// Human tables for plan reports, rendered from the report document.
#pragma once
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// The resolved configuration (model, layout, run, device) as a few '#' lines.
void print_config_header(std::ostream& os, const nlohmann::json& doc);
// How much of a plan to print. kFull: the summary, then the detail (bytes by
// account per rank class; the published formulas beside the exact figures for
// the tightest rank class, each source once; communication; FLOPs and time).
// kBrief: the configuration and the summary alone (sweeps, a quick answer).
enum class PlanDetail { kFull, kBrief };
void print_plan(std::ostream& os, const nlohmann::json& doc, PlanDetail detail = PlanDetail::kFull);

}  // namespace gpuledger::report
