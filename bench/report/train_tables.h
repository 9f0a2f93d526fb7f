// Human tables for train (and infer) reports, rendered from the JSON document:
// per account the measured peak, the breakdown at the rank's peak, the exact
// budget and the difference; published figures; the checks; a failure's reason
// and what would make it fit.
#pragma once
#include <ostream>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

void print_train_summary(std::ostream& os, const nlohmann::json& doc);
void print_checks(std::ostream& os, const nlohmann::json& checks);

}  // namespace gpuledger::report
