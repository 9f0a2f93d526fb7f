// gpuledger: one binary, one subcommand per job (docs/architecture.md "Command line").
// Parses with CLI11, runs the chosen subcommand, maps failures to exit statuses:
// 0 ok, 1 a check failed or the run failed, 2 usage (bad option, bad config,
// a layout that does not divide).
#include <unistd.h>
#include <CLI/CLI.hpp>

#include <cerrno>
#include <chrono>
#include <cstdlib>
#include <cstring>
#include <iostream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "bench/cli/commands.h"
#include "bench/cli/guarded_run.h"
#include "bench/exit_codes.h"
#include "kernels/cpu/blas_core.h"

namespace {

// Under mpirun/srun every rank parses the same command line, so a usage error
// is the same on every rank: only the launcher's rank 0 prints it (the exit
// status is 2 on all). Read from the launcher's environment, before MPI starts.
// The silent ranks linger a moment before exiting (quiet_usage_exit), because
// mpirun kills the whole job as soon as one rank exits non-zero and rank 0
// could die before its message is out.
bool prints_usage_errors() {
  for (const char* var : {"OMPI_COMM_WORLD_RANK", "PMIX_RANK", "PMI_RANK", "SLURM_PROCID"}) {
    const char* v = std::getenv(var);
    if (v != nullptr && *v != '\0') return std::string(v) == "0";
  }
  return true;
}

int quiet_usage_exit(int code) {
  if (code != 0) std::this_thread::sleep_for(std::chrono::seconds(1));
  return code;
}

// A BLAS whose kernels are narrower than the CPU (kernels/cpu/blas_core.h):
// re-execute this very command with OPENBLAS_CORETYPE set, before anything
// else starts (MPI, threads), or say so when the user's setting keeps it.
void match_blas_core_to_cpu(char** argv) {
  const gpuledger::BlasCoreCheck check = gpuledger::check_this_blas_core();
  const gpuledger::BlasCoreAction action =
      gpuledger::decide_blas_core_action(check, std::getenv("OPENBLAS_CORETYPE"),
                                         std::getenv("GPULEDGER_BLAS_CORETYPE"), std::getenv("GPULEDGER_BLAS_REEXEC"));
  if (action.reexec_with) {
    if (setenv("OPENBLAS_CORETYPE", action.reexec_with->c_str(), 1) == 0 &&
        setenv("GPULEDGER_BLAS_REEXEC", "1", 1) == 0)
      execv("/proc/self/exe", argv);
    // Still here: the exec failed; run on with the narrow kernels, said once.
    if (prints_usage_errors())
      std::cerr << "gpuledger: warning: " << check.describe()
                << " (re-executing with it failed: " << std::strerror(errno) << ")\n";
    return;
  }
  if (!action.warning.empty() && prints_usage_errors()) std::cerr << "gpuledger: " << action.warning << "\n";
}

// The command as typed, its words joined by spaces (recorded by calibrate).
std::string command_line(int argc, char** argv) {
  std::string s = "gpuledger";
  for (int i = 1; i < argc; ++i) s += std::string(" ") + argv[i];
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  using namespace gpuledger;
  using namespace gpuledger::cli;
  match_blas_core_to_cpu(argv);
  CLI::App app{
      "gpuledger: what distributed transformer training and inference really cost, per rank "
      "(bytes by account, FLOPs, time, MFU, communication), beside the analytic budget"};
  app.require_subcommand(1);
  app.set_version_flag("--version", std::string("gpuledger ") + GPULEDGER_VERSION);
  std::vector<Command> commands;
  add_models_command(app, commands);
  add_devices_command(app, commands);
  add_run_command(app, commands, "plan");
  add_run_command(app, commands, "kv");
  add_serve_plan_command(app, commands);
  add_peak_command(app, commands);
  add_calibrate_command(app, commands, command_line(argc, argv));
  add_run_command(app, commands, "train");
  add_check_command(app, commands);
  add_regress_command(app, commands);
  add_run_command(app, commands, "infer");
  add_sweep_command(app, commands);

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    // prints help (code 0) or the error message (rank 0 only under a launcher)
    std::ostringstream quiet;
    if (!prints_usage_errors()) return quiet_usage_exit(app.exit(e, quiet, quiet) == 0 ? kExitOk : kExitUsage);
    return app.exit(e) == 0 ? kExitOk : kExitUsage;
  }
  const bool usage_out = prints_usage_errors();
  for (auto& c : commands) {
    if (!c.app->parsed()) continue;
    const GuardedRun g = run_guarded(c.run);
    if (!g.threw) return g.exit;
    if (g.exit == kExitUsage && !usage_out) return quiet_usage_exit(kExitUsage);
    std::cerr << "gpuledger " << c.app->get_name() << (g.exit == kExitUsage ? ": error: " : ": failed: ") << g.error
              << "\n";
    return g.exit;
  }
  return kExitUsage;
}
