// libFuzzer target: sweep grids (bench/cli/sweep_grid.cpp parse_axis,
// check_grid_size, make_points). The input is split at newlines into --grid
// arguments, checked against a subcommand with a few options of each kind;
// each either parses or throws SweepUsage, and the points made never exceed
// limits::kMaxGridPoints.
#include <CLI/CLI.hpp>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <sstream>
#include <string>
#include <vector>

#include "bench/cli/sweep_grid.h"
#include "core/limits.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  CLI::App sub{"fuzz", "plan"};
  int64_t tp = 1, pp = 1;
  bool sp = false;
  std::string schedule = "1f1b";
  sub.add_option("--tp", tp);
  sub.add_option("--pp", pp);
  sub.add_flag("--sp", sp);
  sub.add_option("--schedule", schedule);
  std::istringstream in(std::string(reinterpret_cast<const char*>(data), size));
  std::vector<gpuledger::cli::GridAxis> axes;
  std::string line;
  try {
    while (std::getline(in, line) && axes.size() < 8) axes.push_back(gpuledger::cli::parse_axis(line, sub));
    if (axes.empty()) return 0;
    const auto points = gpuledger::cli::make_points(axes, {});
    if (points.empty() || static_cast<int64_t>(points.size()) > gpuledger::limits::kMaxGridPoints) std::abort();
  } catch (const gpuledger::cli::SweepUsage&) {
  }
  return 0;
}
