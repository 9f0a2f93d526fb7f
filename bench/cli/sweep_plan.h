// A sweep's plan: the subcommand's options parsed once from the fixed
// arguments, the grid (layout=auto expanded into dp·tp·pp choices), its
// points in order, and per point what the sweep needs before running it —
// whether the subcommand refuses it (a skipped point) and how many ranks its
// job has. Every usage error is found here, before any point runs.
#pragma once
#include <CLI/CLI.hpp>

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "bench/cli/commands.h"
#include "bench/cli/sweep_grid.h"
#include "bench/cli/sweep_layouts.h"

namespace gpuledger::cli {

struct SweepOptions {
  std::string sub;
  std::vector<std::string> grids;
  std::string out;
  bool tables = false;
  bool resume = false;
  bool list = false;
  std::optional<int64_t> point;  // --point N (or SLURM_ARRAY_TASK_ID): run that one point
  std::string merge;             // --merge DIR: build the index from the folder, run nothing
  int64_t np = 0;                // --np: the ranks a point may have (0: the launcher's world)
  std::string launcher;          // --launcher: how a multi-rank point is started
};

struct SweepPlan {
  std::unique_ptr<RunCommand> command;
  CLI::App root;
  CLI::App* app = nullptr;
  std::vector<GridAxis> axes;
  std::vector<Point> points;
  int64_t world = 0;  // the ranks the sweep has (0: not known: any point may launch its own)
  std::vector<std::pair<LayoutChoice, std::string>> refused_layouts;  // layout=auto: left out, and why
};

// Parses the fixed arguments, the grid and every point's values; throws SweepUsage.
void prepare(SweepPlan& s, const SweepOptions& o, const std::vector<std::string>& fixed);

// Why the subcommand refuses the point (a layout that does not divide, a
// refused combination, more ranks than the sweep has), or nullopt. Leaves the
// point's values set on the subcommand's options.
std::optional<std::string> skip_reason(SweepPlan& s, const std::string& sub, const Point& p);

// The ranks of the point's job: dp·tp·pp for train, tp for infer, 1 for plan,
// kv and the meta backend (which simulates its ranks in one process). Reads the
// options as the last apply_point/skip_reason left them.
int64_t point_ranks(SweepPlan& s, const std::string& sub);
// The option's value as text ("" when neither given nor defaulted).
std::string option_text(CLI::App& app, const std::string& name);

}  // namespace gpuledger::cli
