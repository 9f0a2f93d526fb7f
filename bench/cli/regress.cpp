// `gpuledger regress REPORT... --baseline BASE...` (or `regress --baseline
// BASE [--baseline BASE...] REPORT...`: regress_sides.h) gates one point's new
// reports against its baseline (bench/report/regress_gate.h; the rules in
// docs/regress.md): the loss per step, each rank's peak bytes per account and
// comm bytes per collective, then MFU and tokens/s by the medians of the
// repetitions. Exit 1 naming what regressed; exit 2 when the inputs are not
// one point (another configuration, another machine, not a train report).
// `--history FILE` appends the run's line; scripts/regress_nightly.sh runs it
// for every nightly point.
#include <fmt/format.h>
#include <CLI/CLI.hpp>

#include <filesystem>
#include <iostream>
#include <memory>

#include "bench/cli/commands.h"
#include "bench/cli/regress_sides.h"
#include "bench/exit_codes.h"
#include "bench/report/format.h"
#include "bench/report/regress_gate.h"
#include "bench/report/regress_history.h"
#include "bench/report/report.h"
#include "bench/report/report_reader.h"
#include "bench/report/train_tables.h"
#include "core/model_config.h"

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct RegressOptions {
  std::vector<std::string> reports, baselines;  // as CLI11 collected them; sorted into sides by sides_as_typed
  report::GateOptions gate;
  std::string history, point;
  OutputOptions out;
};

std::vector<report::ReportFile> read_all(const std::vector<std::string>& paths) {
  std::vector<report::ReportFile> files;
  for (const auto& p : paths) files.push_back(report::read_report_file(p));  // malformed: exit 2
  return files;
}

// The files in the order typed: CLI11 records one parse_order entry per
// positional value and per --baseline occurrence (each takes one file).
std::vector<TypedFile> files_as_typed(const CLI::App& app, const RegressOptions& o) {
  const CLI::Option* baseline = app.get_option("--baseline");
  std::vector<TypedFile> typed;
  size_t next_report = 0, next_baseline = 0;
  for (const CLI::Option* opt : app.parse_order()) {
    if (opt == baseline && next_baseline < o.baselines.size())
      typed.push_back({true, o.baselines[next_baseline++]});
    else if (opt->get_positional() && next_report < o.reports.size())
      typed.push_back({false, o.reports[next_report++]});
  }
  return typed;
}

int run_regress(RegressOptions o, const CLI::App& app) {
  const RegressSides sides = regress_sides(files_as_typed(app, o));
  o.reports = sides.reports;
  o.baselines = sides.baselines;
  if (o.reports.empty())
    throw ConfigError("reports",
                      "no new report to gate: regress NEW.json --baseline BASE.json (or regress --baseline "
                      "BASE.json NEW.json)");
  const std::vector<report::ReportFile> cur = read_all(o.reports), base = read_all(o.baselines);
  const report::GateResult g = report::run_gate(cur, base, o.gate);
  json result = report::make_report("regress");
  result["status"] = g.ok() ? "ok" : "failed";  // agrees with the exit status
  result["run_status"] = cur.front().root().string_or("status", "ok");
  result["env"]["reports"] = o.reports;
  result["env"]["baselines"] = o.baselines;
  result["checks"] = g.checks;
  result["regressions"] = g.regressions;
  result["notes"] = g.notes;
  result["metrics"] = g.metrics;
  const std::string point = o.point.empty() ? std::filesystem::path(o.reports.front()).stem().string() : o.point;
  if (!o.history.empty()) report::append_history(o.history, report::history_line(point, cur.front().doc, g));
  if (!o.out.json_path.empty()) report::write_report(result, o.out.json_path);
  if (!o.out.quiet) {
    auto& os = table_stream(o.out);
    os << fmt::format("# gpuledger regress {}: {} report(s) against {} baseline(s); MFU and tokens/s tolerance {}\n",
                      point, cur.size(), base.size(), report::format_percent(o.gate.perf_tol));
    report::print_checks(os, g.checks);
    for (const auto& n : g.notes) os << "# note: " << n << "\n";
    for (const auto& r : g.regressions) os << "REGRESSED " << point << ": " << r << "\n";
    if (g.ok()) os << "# " << point << ": no regression\n";
  }
  return g.ok() ? kExitOk : kExitFailed;
}

}  // namespace

void add_regress_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<RegressOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app =
      root.add_subcommand("regress", "gate new reports of a point against its baseline; exit 1 on a regression");
  app->add_option("reports", o->reports, "the new report(s) of one point (several: repetitions)")
      ->check(CLI::ExistingFile);
  app->add_option("--baseline", o->baselines,
                  "a baseline report, one per --baseline (repeat it for repetitions); after the new reports, "
                  "every file that follows is a baseline too: regress NEW... --baseline BASE...")
      ->required()
      ->expected(1)
      ->multi_option_policy(CLI::MultiOptionPolicy::TakeAll)
      ->allow_extra_args(false)
      ->check(CLI::ExistingFile);
  app->add_option("--perf-tol,--mfu-tol", o->gate.perf_tol,
                  "MFU and tokens/s may fall by this fraction (or by the baseline's own spread, if larger)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--loss-tol", o->gate.loss_tol,
                  "relative loss tolerance (default by dtype: fp32 1e-5, fp16 1e-3, bf16 1e-2)")
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--alpha", o->gate.alpha, "significance of the U test (with ≥ 4 repetitions a side)")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app->add_flag("--allow-other-machine", o->gate.allow_other_machine,
                "accept a baseline from another machine fingerprint: gate bytes and loss, not timing");
  app->add_option("--history", o->history, "append one JSON line for this run to FILE (.jsonl)");
  app->add_option("--point", o->point, "the point's name in the history (default: the report's file name)");
  add_output_options(*app, o->out);
  app->footer(
      "Orders:\n"
      "  gpuledger regress new.json --baseline base.json\n"
      "  gpuledger regress --baseline base.json new.json\n"
      "  gpuledger regress n1.json n2.json n3.json --baseline b1.json b2.json b3.json   (repetitions)\n"
      "  gpuledger regress --baseline b1.json --baseline b2.json n1.json n2.json\n"
      "Once a new report comes first, every file after --baseline is a baseline; when --baseline comes\n"
      "first, it takes one file each and the files after it are the new reports (docs/regress.md).");
  out.push_back({app, [o, app]() { return run_regress(*o, *app); }});
}

}  // namespace gpuledger::cli
