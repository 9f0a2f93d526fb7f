// gpuledger: one binary, one subcommand per job (DESIGN.md "Command line").
// Parses with CLI11, runs the chosen subcommand, maps failures to exit statuses:
// 0 ok, 1 a check failed or the run failed, 2 usage (bad option, bad config,
// a layout that does not divide).
#include <CLI/CLI.hpp>

#include <iostream>
#include <stdexcept>
#include <vector>

#include "bench/cli/commands.h"
#include "bench/exit_codes.h"
#include "models/config.h"
#include "parallel/layout.h"

int main(int argc, char** argv) {
  using namespace gpuledger;
  using namespace gpuledger::cli;
  CLI::App app{"gpuledger: what distributed transformer training and inference really cost, per rank "
               "(bytes by account, FLOPs, time, MFU, communication), beside the analytic budget"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpuledger ") + GPULEDGER_VERSION);
  std::vector<Command> commands;
  add_models_command(app, commands);
  add_devices_command(app, commands);
  add_plan_command(app, commands);
  add_kv_command(app, commands);
  add_peak_command(app, commands);
  add_train_command(app, commands);
  add_check_command(app, commands);
  add_regress_command(app, commands);
  add_infer_command(app, commands);
  add_sweep_command(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    const int code = app.exit(e);   // prints help (code 0) or the error message
    return code == 0 ? kExitOk : kExitUsage;
  }
  for (auto& c : commands) {
    if (!c.app->parsed()) continue;
    try {
      return c.run();
    } catch (const ConfigError& e) {
      std::cerr << "gpuledger " << c.app->get_name() << ": error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const LayoutError& e) {
      std::cerr << "gpuledger " << c.app->get_name() << ": error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const std::invalid_argument& e) {
      std::cerr << "gpuledger " << c.app->get_name() << ": error: " << e.what() << "\n";
      return kExitUsage;
    } catch (const std::exception& e) {
      std::cerr << "gpuledger " << c.app->get_name() << ": failed: " << e.what() << "\n";
      return kExitFailed;
    }
  }
  return kExitUsage;
}
