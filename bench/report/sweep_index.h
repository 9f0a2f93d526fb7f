// What a sweep's index (DIR/sweep.json, gpuledger.sweep/1, docs/sweep.md) and
// its final table show per point: headline figures read back from the
// point's report.
#pragma once
#include <ostream>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

inline constexpr std::string_view kSweepSchema = "gpuledger.sweep/1";

// The headline figures of a report of `kind`; null where the report has no such figure.
nlohmann::json headline(const std::string& kind, const nlohmann::json& doc);
// One row per point of the index, its headline figures in columns chosen by kind.
void print_sweep_table(std::ostream& os, const std::string& kind, const nlohmann::json& index);

}  // namespace gpuledger::report
