// `gpuledger regress REPORT --baseline BASE` compares a report with a baseline
// of the same configuration: MFU and tokens/s may not fall, and peak bytes per
// rank may not grow, by more than their tolerances; exit 1 on a regression.
// Nightly CI runs a point, then `regress` against results/baselines/.
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
#include "bench/report/table.h"
#include "bench/report/train_tables.h"

namespace gpuledger::cli {

using nlohmann::json;

namespace {

struct RegressOptions {
  std::string report, baseline;
  double mfu_tol = 0.05;   // MFU may fall by this fraction of the baseline's
  double bytes_tol = 0.0;  // peak bytes may grow by this fraction
  OutputOptions out;
};

// A figure of a report by path ("summary.mfu"); nullopt when absent or null.
std::optional<double> figure(const json& doc, const std::string& a, const std::string& b) {
  if (!doc.contains(a) || !doc[a].contains(b) || doc[a][b].is_null()) return std::nullopt;
  return doc[a][b].get<double>();
}

int run_regress(const RegressOptions& o) {
  const json cur = report::read_report(o.report);
  const json base = report::read_report(o.baseline);
  if (cur.value("kind", "") != base.value("kind", ""))
    throw ConfigError("baseline", "report kinds differ: " + cur.value("kind", "?") + " vs " + base.value("kind", "?"));
  // Name every setting that differs, so that a baseline recorded before an
  // option existed (absent there) says so instead of a bare "not the same".
  std::string differ;
  for (const char* section : {"model", "layout", "run"}) {
    const json& c = cur["config"][section];
    const json& b = base["config"][section];
    if (c == b) continue;
    if (!c.is_object() || !b.is_object()) {
      differ += fmt::format("\n  {}: {} vs {}", section, c.dump(), b.dump());
      continue;
    }
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    for (const auto& [k, v] : b.items()) keys.insert(k);
    for (const auto& k : keys) {
      const std::string cv = c.contains(k) ? c[k].dump() : "(absent)";
      const std::string bv = b.contains(k) ? b[k].dump() : "(absent: the baseline predates this setting)";
      if (cv != bv) differ += fmt::format("\n  {}.{}: report {} vs baseline {}", section, k, cv, bv);
    }
  }
  if (!differ.empty())
    throw ConfigError("baseline",
                      "the report and the baseline are not the same configuration; re-record the "
                      "baseline (scripts/regress_nightly.sh --update) if the change is intended:" +
                          differ);
  json checks = json::array();
  // Higher is better: MFU and tokens/s may fall by at most mfu_tol of the baseline.
  for (const char* name : {"mfu", "tokens_per_s"}) {
    const auto c = figure(cur, "summary", name), b = figure(base, "summary", name);
    if (!c || !b) continue;
    json chk = bench::make_check(std::string("regress.") + name + ">=baseline", -1, *c, *b, o.mfu_tol);
    chk["ok"] = *c >= *b * (1.0 - o.mfu_tol);
    chk["kind"] = "lower_bound";
    checks.push_back(chk);
  }
  // Lower is better: each rank's peak bytes may grow by at most bytes_tol.
  for (size_t i = 0; i < std::min(cur["ranks"].size(), base["ranks"].size()); ++i) {
    const auto& cr = cur["ranks"][i];
    const auto& br = base["ranks"][i];
    if (!cr.contains("measured") || !br.contains("measured")) continue;
    const double c = cr["measured"]["peak_bytes"].get<double>(), b = br["measured"]["peak_bytes"].get<double>();
    json chk = bench::make_check("regress.peak_bytes<=baseline", cr["rank"].get<int64_t>(), c, b, o.bytes_tol);
    chk["ok"] = c <= b * (1.0 + o.bytes_tol);
    chk["kind"] = "upper_bound";
    checks.push_back(chk);
  }
  const bool ok = bench::all_ok(checks) && cur.value("status", "ok") == "ok";
  json result = report::make_report("regress");
  result["env"]["report"] = o.report;
  result["env"]["baseline"] = o.baseline;
  result["checks"] = checks;
  if (!o.out.json_path.empty()) report::write_report(result, o.out.json_path);
  if (!o.out.quiet) {
    auto& os = table_stream(o.out);
    os << fmt::format("# gpuledger regress {} against {} (MFU/tokens tolerance {}, bytes tolerance {})\n", o.report,
                      o.baseline, report::format_percent(o.mfu_tol), report::format_percent(o.bytes_tol));
    report::print_checks(os, checks);
  }
  return ok ? kExitOk : kExitFailed;
}

}  // namespace

void add_regress_command(CLI::App& root, std::vector<Command>& out) {
  auto o = std::make_shared<RegressOptions>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand("regress", "compare a report with a baseline; exit 1 on a regression");
  app->add_option("report", o->report, "the new report (JSON)")->required()->check(CLI::ExistingFile);
  app->add_option("--baseline", o->baseline, "the baseline report (JSON)")->required()->check(CLI::ExistingFile);
  app->add_option("--mfu-tol", o->mfu_tol, "MFU and tokens/s may fall by this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1.0));
  app->add_option("--bytes-tol", o->bytes_tol, "peak bytes may grow by this fraction")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 10.0));
  add_output_options(*app, o->out);
  out.push_back({app, [o]() { return run_regress(*o); }});
}

}  // namespace gpuledger::cli
