// `gpuledger check REPORT` re-checks a train/infer report against its own
// budgets (measured vs exact per account, workspace vs its bound, executed vs
// analytic FLOPs), optionally with a byte tolerance; exit 1 on a failure.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>
#include <memory>
#include <set>

#include "bench/checks.h"
#include "bench/cli/commands.h"
#include "bench/exit_codes.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/report_reader.h"
#include "bench/report/table.h"
#include "bench/report/train_tables.h"

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct CheckOptions {
  std::string report;
  double bytes_tol = 0.0;  // relative tolerance on exact accounts (0: to the byte)
  OutputOptions out;
};

int run_check(const CheckOptions& o) {
  const report::ReportFile file = report::read_report_file(o.report);
  const report::JsonView doc = file.root();
  const auto ranks = doc.find("ranks");
  if (!ranks || ranks->size() == 0 || !ranks->at(0).has("measured"))
    throw ConfigError(
        "report", o.report + ": kind '" + file.kind() + "' has no measurement to check (train and infer reports do)");
  json checks = json::array();
  for (const auto& r : ranks->elements())
    for (auto c : bench::rank_checks(r)) {
      if (c.value("kind", "") != "upper_bound" && o.bytes_tol > 0 &&
          c["name"].get<std::string>().rfind("bytes.", 0) == 0)
        c = bench::make_check(c["name"], c["rank"], c["measured"], c["expected"], o.bytes_tol);
      checks.push_back(c);
    }
  const std::string run_status = doc.string_or("status", "ok");
  const bool ok = bench::all_ok(checks) && run_status == "ok";
  json result = report::make_report("check");
  result["env"]["checked"] = o.report;
  result["checks"] = checks;
  result["run_status"] = run_status;
  // The check's own status agrees with its exit code: "ok" only when it exits 0.
  result["status"] = ok ? "ok" : "failed";
  if (!o.out.json_path.empty()) report::write_report(result, o.out.json_path);
  if (!o.out.quiet) {
    auto& os = table_stream(o.out);
    os << fmt::format("# gpuledger check {} (run status {})\n", o.report, run_status);
    report::print_checks(os, checks);
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_check_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<CheckOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand("check", "re-check a train/infer report against its budgets; exit 1 on failure");
  app->add_option("report", o->report, "the report (JSON)")->required()->check(CLI::ExistingFile);
  app->add_option("--bytes-tol", o->bytes_tol, "relative tolerance on the exact accounts (default 0: to the byte)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  add_output_options(*app, o->out);
  out.push_back({app, [o]() { return run_check(*o); }});
}

}  // namespace gpuledger::cli
