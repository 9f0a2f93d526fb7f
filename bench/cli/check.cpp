// `gpuledger check REPORT` re-checks a train/infer report: against its own
// budgets (measured vs exact per account, workspace vs its bound, executed vs
// analytic FLOPs), and against the budget this binary re-derives from the
// report's config (bench/run/check_rederive.h), with the total peak against
// its accounts; optionally with a byte tolerance. Exit 1 on a failure (the
// --json status says "failed"), 2 for a report that cannot be read.
#include <fmt/format.h>
#include <fmt/ranges.h>
#include <CLI/CLI.hpp>

#include <cmath>
#include <iostream>
#include <memory>
#include <set>

#include "bench/cli/commands.h"
#include "bench/exit_codes.h"
#include "bench/report/checks.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/report_reader.h"
#include "bench/report/table.h"
#include "bench/report/train_tables.h"
#include "bench/run/check_rederive.h"

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct CheckOptions {
  std::string report;
  double bytes_tol = 0.0;  // relative tolerance on exact accounts (0: to the byte)
  OutputOptions out;
};

// A byte tolerance widens the exact-account checks (bytes.* and
// measured_vs_rederived.bytes.*); never the upper bounds, the re-derivation of
// the budget itself (rederive.*) or the totals.
json with_tolerance(json c, double bytes_tol) {
  const std::string name = c["name"].get<std::string>();
  const bool bytes = name.rfind("bytes.", 0) == 0 || name.rfind("measured_vs_rederived.bytes.", 0) == 0;
  if (c.value("kind", "") == "upper_bound" || bytes_tol <= 0 || !bytes) return c;
  return bench::make_check(name, c["rank"], c["measured"], c["expected"], bytes_tol);
}

int run_check(const CheckOptions& o) {
  const report::ReportFile file = report::read_report_file(o.report);
  const report::JsonView doc = file.root();
  const auto ranks = doc.find("ranks");
  if (!ranks || ranks->size() == 0 || !ranks->at(0).has("measured"))
    throw ConfigError(
        "report", o.report + ": kind '" + file.kind() + "' has no measurement to check (train and infer reports do)");
  json checks = json::array();
  // The report's own budget against its measurement (train), then this
  // binary's budget re-derived from the report's config (bench/run/check_rederive.h).
  if (file.kind() == "train")
    for (const auto& r : ranks->elements())
      for (const auto& c : bench::rank_checks(r)) checks.push_back(with_tolerance(c, o.bytes_tol));
  for (const auto& c : run::rederived_checks(doc)) checks.push_back(with_tolerance(c, o.bytes_tol));
  const std::string run_status = doc.string_or("status", "ok");
  const bool ok = bench::all_ok(checks) && run_status == "ok";
  json differ = json::array();
  for (const auto& c : checks)
    if (!c["ok"].get<bool>()) differ.push_back(c["name"].get<std::string>() + " (rank " + c["rank"].dump() + ")");
  json result = report::make_report("check");
  result["env"]["checked"] = o.report;
  result["checks"] = checks;
  result["failed_checks"] = differ;
  result["run_status"] = run_status;
  // The check's own status agrees with its exit code: "ok" only when it exits 0.
  result["status"] = ok ? "ok" : "failed";
  if (!o.out.json_path.empty()) report::write_report(result, o.out.json_path);
  if (!o.out.quiet) {
    auto& os = table_stream(o.out);
    os << fmt::format("# gpuledger check {} (run status {}; budget re-derived from its config)\n", o.report,
                      run_status);
    report::print_checks(os, checks);
    if (!differ.empty()) os << fmt::format("\n{} checks differ: {}\n", differ.size(), fmt::join(differ, ", "));
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_check_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<CheckOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand(
      "check",
      "re-check a train/infer report against its budgets and the budget re-derived from its config; exit 1 on failure");
  app->add_option("report", o->report, "the report (JSON)")->required()->check(CLI::ExistingFile);
  app->add_option("--bytes-tol", o->bytes_tol, "relative tolerance on the exact accounts (default 0: to the byte)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  add_output_options(*app, o->out);
  out.push_back({app, [o]() { return run_check(*o); }});
}

}  // namespace gpuledger::cli
