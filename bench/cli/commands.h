// The subcommand registry: each bench/cli/<name>.cpp adds its CLI11 subcommand
// and the function that runs it. main.cpp parses, then runs the one chosen.
#pragma once
#include <functional>
#include <iosfwd>
#include <string>
#include <vector>

#include "bench/cli/options.h"

namespace CLI { class App; }

namespace gpuledger::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;   // returns the exit status
};

void add_models_command(CLI::App& root, std::vector<Command>& out);
void add_devices_command(CLI::App& root, std::vector<Command>& out);
void add_plan_command(CLI::App& root, std::vector<Command>& out);
void add_kv_command(CLI::App& root, std::vector<Command>& out);
void add_peak_command(CLI::App& root, std::vector<Command>& out);
void add_train_command(CLI::App& root, std::vector<Command>& out);
void add_check_command(CLI::App& root, std::vector<Command>& out);
void add_regress_command(CLI::App& root, std::vector<Command>& out);
void add_infer_command(CLI::App& root, std::vector<Command>& out);
// Runs plan, kv, train or infer over a grid of points (bench/cli/sweep.cpp).
void add_sweep_command(CLI::App& root, std::vector<Command>& out);

// Where the human-readable table goes: stdout, or stderr when the JSON report goes to stdout.
std::ostream& table_stream(const Options& o);

// --ranks: "roles" (one per pipeline stage), "all", or a comma list of ranks < world.
std::vector<int64_t> select_ranks(const std::string& spec, const Layout& l, int64_t world);

}  // namespace gpuledger::cli
