// The serve-plan report as tables: the demand, then per device one device
// alone (the concurrency by Little's law, the step, the memory it needs) and
// the fewest devices that serve it (docs/serving-plan.md).
#pragma once
#include <nlohmann/json.hpp>
#include <ostream>

namespace gpuledger::report {

void print_serve_plan(std::ostream& os, const nlohmann::json& doc);

}  // namespace gpuledger::report
