// The run commands by name, and their registration as subcommands (see commands.h).
#include <CLI/CLI.hpp>

#include "bench/cli/commands.h"

namespace gpuledger::cli {

std::unique_ptr<RunCommand> make_run_command(const std::string& name) {
  if (name == "plan") return make_plan_command();
  if (name == "kv") return make_kv_command();
  if (name == "train") return make_train_command();
  if (name == "infer") return make_infer_command();
  return nullptr;
}

std::string run_command_description(const std::string& name) {
  if (name == "plan") return "analytic per-rank budget (bytes by account, comm, FLOPs) and whether it fits a device";
  if (name == "kv") return "analytic KV-cache bytes, capacity (concurrent sequences) and decode roofline";
  if (name == "train") return "run training steps; every rank's ledger by account beside the exact budget";
  if (name == "infer")
    return "serve requests with a KV cache: bytes reserved and used, waste, capacity, throughput and bandwidth, "
           "beside the kv prediction";
  return {};
}

void add_run_command(CLI::App& root, std::vector<Command>& out, const std::string& name) {
  std::shared_ptr<RunCommand> command = make_run_command(name);  // CLI11 binds to it; the closure keeps it alive
  auto* app = root.add_subcommand(name, run_command_description(name));
  command->bind(*app);
  out.push_back({app, [command]() { return command->run(); }});
}

}  // namespace gpuledger::cli
