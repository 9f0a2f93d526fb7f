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
#include "bench/report/report_reader.h"
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
std::optional<double> figure(const report::JsonView& doc, const char* section, const char* name) {
  const auto s = doc.find(section);
  if (!s) return std::nullopt;
  const auto v = s->find(name);
  return v ? std::optional<double>(v->number()) : std::nullopt;
}

// Every setting of config.model/layout/run that differs between the two, one per line.
std::string config_differences(const report::JsonView& cur, const report::JsonView& base) {
  std::string differ;
  const report::JsonView cur_config = cur.at("config"), base_config = base.at("config");
  for (const char* section : {"model", "layout", "run"}) {
    const auto c = cur_config.find(section), b = base_config.find(section);
    const json absent = nullptr;
    const json& cj = c ? c->raw() : absent;
    const json& bj = b ? b->raw() : absent;
    if (cj == bj) continue;
    if (!cj.is_object() || !bj.is_object()) {
      differ += fmt::format("\n  {}: {} vs {}", section, cj.dump(), bj.dump());
      continue;
    }
    // Name every setting that differs, so that a baseline recorded before an
    // option existed (absent there) says so instead of a bare "not the same".
    std::set<std::string> keys;
    for (const auto& [k, v] : cj.items()) keys.insert(k);
    for (const auto& [k, v] : bj.items()) keys.insert(k);
    for (const auto& k : keys) {
      const std::string cv = cj.contains(k) ? cj.at(k).dump() : "(absent)";
      const std::string bv = bj.contains(k) ? bj.at(k).dump() : "(absent: the baseline predates this setting)";
      if (cv != bv) differ += fmt::format("\n  {}.{}: report {} vs baseline {}", section, k, cv, bv);
    }
  }
  return differ;
}

int run_regress(const RegressOptions& o) {
  const report::ReportFile cur_file = report::read_report_file(o.report);
  const report::ReportFile base_file = report::read_report_file(o.baseline);
  const report::JsonView cur = cur_file.root(), base = base_file.root();
  if (cur_file.kind() != base_file.kind())
    throw ConfigError("baseline", "report kinds differ: " + cur_file.kind() + " vs " + base_file.kind());
  const std::string differ = config_differences(cur, base);
  if (!differ.empty())
    throw ConfigError("baseline",
                      "the report and the baseline are not the same configuration; re-record the "
                      "baseline (scripts/regress_nightly.sh --update) if the change is intended:" +
                          differ);
  const report::JsonView cur_ranks = cur.at("ranks"), base_ranks = base.at("ranks");
  if (cur_ranks.size() != base_ranks.size())
    cur_ranks.fail(fmt::format("{} ranks, the baseline has {}", cur_ranks.size(), base_ranks.size()));
  if (cur_ranks.size() == 0) cur_ranks.fail("no ranks: nothing to compare");
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
  for (size_t i = 0; i < cur_ranks.size(); ++i) {
    const auto cr = cur_ranks.at(i).find("measured"), br = base_ranks.at(i).find("measured");
    if (!cr || !br) continue;
    const double c = cr->at("peak_bytes").number(), b = br->at("peak_bytes").number();
    json chk =
        bench::make_check("regress.peak_bytes<=baseline", cur_ranks.at(i).at("rank").integer(), c, b, o.bytes_tol);
    chk["ok"] = c <= b * (1.0 + o.bytes_tol);
    chk["kind"] = "upper_bound";
    checks.push_back(chk);
  }
  const std::string run_status = cur.string_or("status", "ok");
  const bool ok = bench::all_ok(checks) && run_status == "ok";
  json result = report::make_report("regress");
  result["env"]["report"] = o.report;
  result["env"]["baseline"] = o.baseline;
  result["checks"] = checks;
  result["run_status"] = run_status;
  // The gate's own status agrees with its exit code: "ok" only when it exits 0.
  result["status"] = ok ? "ok" : "failed";
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
