// The run commands by name, and their registration as subcommands (see commands.h).
#include <CLI/CLI.hpp>

#include "bench/cli/commands.h"

#include <iostream>

#include "bench/exit_codes.h"
#include "bench/report/checks.h"

namespace gpuledger::cli {

std::unique_ptr<RunCommand> make_run_command(const std::string& name) {
  if (name == "plan") return make_plan_command();
  if (name == "kv") return make_kv_command();
  if (name == "train") return make_train_command();
  if (name == "infer") return make_infer_command();
  return nullptr;
}

int run_report_exit_status(const nlohmann::json& doc, const std::string& command) {
  const std::string status = doc.value("status", "ok");
  if (status != "ok") {
    std::cerr << "gpuledger " << command << ": failed: " << status << ": " << doc.value("error", "(no reason recorded)")
              << "\n";
    return kExitFailed;
  }
  int failed_checks = 0;
  if (const auto checks = doc.find("checks"); checks != doc.end() && checks->is_array())
    for (const auto& c : *checks)
      if (!c.is_object() || !c.value("ok", false)) ++failed_checks;
  if (failed_checks == 0) return kExitOk;
  std::cerr << "gpuledger " << command << ": failed: " << failed_checks
            << " check(s) failed (see the table or the report)\n";
  return kExitFailed;
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
