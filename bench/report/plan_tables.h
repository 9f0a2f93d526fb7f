// Human tables for plan reports, rendered from the report document.
#pragma once
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// The resolved configuration (model, layout, run, device) as a few '#' lines.
void print_config_header(std::ostream& os, const nlohmann::json& doc);
// The whole plan: config header, accounts per role, published figures, comm, FLOPs/time.
void print_plan(std::ostream& os, const nlohmann::json& doc);

}  // namespace gpuledger::report
