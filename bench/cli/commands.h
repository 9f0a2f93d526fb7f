// The subcommand registry: each bench/cli/<name>.cpp adds its CLI11 subcommand
// and the function that runs it. main.cpp parses, then runs the one chosen.
#pragma once
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "bench/cli/config_options.h"

namespace CLI {
class App;
}

namespace gpuledger::cli {

struct Command {
  CLI::App* app = nullptr;
  std::function<int()> run;  // returns the exit status
};

// A subcommand that runs a configuration (plan, kv, train, infer): its options
// live in the object, registered on an App by bind(); run() resolves them into
// the subcommand's request, runs it, writes the report and prints the tables.
// run() leaves the options as they are, so that sweep (bench/cli/sweep.cpp)
// can set a few of them by name and run again.
class RunCommand {
 public:
  virtual ~RunCommand() = default;
  virtual void bind(CLI::App& app) = 0;
  virtual OutputOptions& output() = 0;
  virtual int run() const = 0;  // the exit status; usage errors throw (ConfigError, LayoutError)
  // Throws ConfigError when an input is wrong in itself, whatever the other
  // options (bench/cli/input_checks.h): an unknown preset, an unreadable or
  // malformed model file, an unknown device, a bad size, an unreadable trace
  // or checkpoint. A sweep makes such a point a usage error (exit 2) before
  // any point runs.
  virtual void check_inputs() const = 0;
  // Throws what run() would throw for these options before it runs anything
  // (ConfigError, LayoutError): a combination the subcommand refuses. Called
  // after check_inputs(); sweep skips such a point without running it.
  virtual void validate() const {}
};

std::unique_ptr<RunCommand> make_plan_command();
std::unique_ptr<RunCommand> make_kv_command();
std::unique_ptr<RunCommand> make_train_command();
std::unique_ptr<RunCommand> make_infer_command();
// By subcommand name: plan, kv, train or infer; nullptr for any other.
std::unique_ptr<RunCommand> make_run_command(const std::string& name);
// The exit status of a train or infer report: 0 when its status is ok and
// every check passed, else 1. A failed run (out of memory, an error) or a
// failed check also says so on stderr, where scripts look, not only in the
// printed tables.
int run_report_exit_status(const nlohmann::json& doc, const std::string& command);
// The one-line description `gpuledger --help` shows for a run command.
std::string run_command_description(const std::string& name);

void add_models_command(CLI::App& root, std::vector<Command>& out);
void add_devices_command(CLI::App& root, std::vector<Command>& out);
void add_run_command(CLI::App& root, std::vector<Command>& out, const std::string& name);
void add_peak_command(CLI::App& root, std::vector<Command>& out);
// Measures this machine into device and network profiles (bench/cli/calibrate.cpp);
// `command_line` is recorded as the profiles' provenance.
void add_calibrate_command(CLI::App& root, std::vector<Command>& out, const std::string& command_line);
void add_check_command(CLI::App& root, std::vector<Command>& out);
void add_regress_command(CLI::App& root, std::vector<Command>& out);
// Runs plan, kv, train or infer over a grid of points (bench/cli/sweep.cpp).
void add_sweep_command(CLI::App& root, std::vector<Command>& out);
// Which device and how many serve a request rate (bench/cli/serve_plan.cpp).
void add_serve_plan_command(CLI::App& root, std::vector<Command>& out);

}  // namespace gpuledger::cli
