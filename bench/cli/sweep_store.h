// A sweep's folder, where every run of the sweep — whole, one --point of a job
// array, a --resume after a kill — meets:
//   DIR/sweep.plan.json    the points in order with their options (rewritten, the same, by every run)
//   DIR/<point>.json       the point's report, as the subcommand wrote it
//   DIR/<point>.log        the point's output (its launcher's too)
//   DIR/<point>.point.json the point's index entry, written last: the point is done when it exists
//   DIR/sweep.json         the index (gpuledger.sweep/1), DIR/sweep.csv one row per point
// Every file is written whole (report::write_report: a temporary name, then rename).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli/sweep_plan.h"

namespace gpuledger::cli {

std::string point_file(const std::string& dir, const std::string& name, const std::string& suffix);

// DIR/sweep.plan.json's document: the kind, the command (without --point,
// --resume, --list), the fixed options, the grid, the world, and the points.
nlohmann::json plan_document(const SweepOptions& o, const std::vector<std::string>& fixed, const SweepPlan& s);

// The point's entry when it is complete and was run with the same options
// (and its report is there and whole, unless it was skipped); null otherwise.
nlohmann::json resumable_entry(const std::string& dir, const Point& p);

// The index entry of a point that ran: its report's status ("check_failed" when
// ok but the run exited 1) and headline figures.
nlohmann::json ran_entry(const std::string& sub, const Point& p, int64_t index, const nlohmann::json& report, int exit,
                         double seconds, const std::string& error);
nlohmann::json skipped_entry(const Point& p, int64_t index, const std::string& reason);

// The index from the plan and the entries in the folder (a point without one is
// "missing"), with its summary; written as DIR/sweep.json and DIR/sweep.csv.
nlohmann::json build_index(const std::string& dir, const nlohmann::json& plan);
void write_index(const std::string& dir, const nlohmann::json& index);
// 0 when every point is ok or skipped and at least one is ok, 1 when one
// failed or is missing, 2 when every point was skipped (none ran).
int index_exit_status(const nlohmann::json& index);

}  // namespace gpuledger::cli
