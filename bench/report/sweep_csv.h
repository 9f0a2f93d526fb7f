// DIR/sweep.csv: one row per point of a sweep's index (docs/sweep.md "CSV").
// The grid keys first, each cell a number where the value is one (tp 2 is 2,
// recompute full is full), then the status and the headline figures
// (bench/report/sweep_index.h); an empty cell where a point has no such figure.
#pragma once
#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

namespace gpuledger::report {

// A CSV cell: a JSON number as written, null empty, a string as is or quoted
// (RFC 4180) when it holds a comma, a quote or a line break.
std::string csv_cell(const nlohmann::json& v);
// A grid value as typed: a number when the whole text reads as one, else the text.
nlohmann::json typed_value(const std::string& text);
void write_sweep_csv(std::ostream& os, const nlohmann::json& index);

}  // namespace gpuledger::report
