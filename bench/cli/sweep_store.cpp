// A sweep's folder (see sweep_store.h).
#include "bench/cli/sweep_store.h"

#include <filesystem>
#include <fstream>

#include "bench/exit_codes.h"
#include "bench/report/report.h"
#include "bench/report/report_reader.h"
#include "bench/report/sweep_csv.h"
#include "bench/report/sweep_index.h"

namespace gpuledger::cli {

using nlohmann::json;
namespace fs = std::filesystem;

namespace {

json read_or_null(const std::string& path) {
  if (!fs::exists(path)) return nullptr;
  try {
    // Index and point files are plain JSON; reports are checked as reports.
    return path.size() >= 11 && path.compare(path.size() - 11, 11, ".point.json") == 0 ? report::read_json_file(path)
                                                                                       : report::read_report(path);
  } catch (const std::exception&) {
    return nullptr;  // cut short by a kill: the point runs again
  }
}

json base_entry(const Point& p, int64_t index) {
  json e = {{"index", index}, {"name", p.name}, {"args", p.args}, {"report", p.name + ".json"}};
  e["values"] = json::object();
  for (const auto& [k, v] : p.values) e["values"][k] = v;
  return e;
}

}  // namespace

std::string point_file(const std::string& dir, const std::string& name, const std::string& suffix) {
  return (fs::path(dir) / (name + suffix)).string();
}

json plan_document(const SweepOptions& o, const std::vector<std::string>& fixed, const SweepPlan& s) {
  json plan;
  plan["schema"] = "gpuledger.sweep-plan/1";
  plan["kind"] = o.sub;
  json command = {"gpuledger", "sweep", o.sub};
  for (const auto& a : fixed) command.push_back(a);
  for (const auto& g : o.grids) command.insert(command.end(), {"--grid", g});
  if (o.np > 0) command.insert(command.end(), {"--np", std::to_string(o.np)});
  command.insert(command.end(), {"--out", o.out});
  plan["command"] = command;
  plan["fixed_args"] = fixed;
  plan["grid"] = json::array();
  for (const auto& a : s.axes) plan["grid"].push_back({{"key", a.key}, {"values", a.values}});
  plan["refused_layouts"] = json::array();
  for (const auto& [c, why] : s.refused_layouts)
    plan["refused_layouts"].push_back({{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}, {"reason", why}});
  plan["world"] = s.world;
  plan["out"] = o.out;
  plan["points"] = json::array();
  for (size_t i = 0; i < s.points.size(); ++i)
    plan["points"].push_back(base_entry(s.points[i], static_cast<int64_t>(i)));
  return plan;
}

json resumable_entry(const std::string& dir, const Point& p) {
  const json e = read_or_null(point_file(dir, p.name, ".point.json"));
  if (!e.is_object() || e.value("args", json()) != json(p.args) || !e.contains("status")) return nullptr;
  if (e["status"] == "skipped") return e;
  const json doc = read_or_null(point_file(dir, p.name, ".json"));
  return doc.is_object() && doc.contains("status") ? e : json(nullptr);
}

json ran_entry(const std::string& sub, const Point& p, int64_t index, const json& doc, int exit, double seconds,
               const std::string& error) {
  json e = base_entry(p, index);
  std::string status = doc.value("status", std::string("error"));
  if (status == "ok" && exit != kExitOk) status = "check_failed";
  e["status"] = status;
  e["exit"] = exit;
  e["seconds"] = seconds;
  e["headline"] = report::headline(sub, doc);
  if (status == "check_failed") {
    std::string names;
    for (const auto& c : doc.value("checks", json::array()))
      if (!c.value("ok", true) && names.find(c.value("name", std::string())) == std::string::npos)
        names += (names.empty() ? "" : ", ") + c.value("name", std::string());
    e["error"] = std::to_string(e["headline"]["checks_failed"].get<int64_t>()) + " check(s) failed: " + names;
  } else if (status != "ok") {
    e["error"] = doc.value("error", error);
  }
  return e;
}

json skipped_entry(const Point& p, int64_t index, const std::string& reason) {
  json e = base_entry(p, index);
  e["status"] = "skipped";
  e["reason"] = reason;
  return e;
}

json build_index(const std::string& dir, const json& plan) {
  json index = plan;
  index["schema"] = report::kSweepSchema;
  index["tool"] = {{"version", GPULEDGER_VERSION}, {"git", report::git_commit()}};
  index["env"] = {{"host", report::host_name()}, {"mpi_ranks", plan.value("world", 0)}};
  int64_t ok = 0, skipped = 0, failed = 0, missing = 0;
  index["points"] = json::array();
  for (const auto& p : plan["points"]) {
    json e = read_or_null(point_file(dir, p["name"], ".point.json"));
    if (!e.is_object() || e.value("args", json()) != p["args"]) {
      e = p;
      e["status"] = "missing";
    }
    const std::string status = e["status"];
    (status == "ok" ? ok : status == "skipped" ? skipped : status == "missing" ? missing : failed) += 1;
    index["points"].push_back(e);
  }
  const int64_t n = static_cast<int64_t>(plan["points"].size());
  index["summary"] = {
      {"points", n},        {"done", n - missing},     {"ok", ok}, {"skipped", skipped}, {"failed", failed},
      {"missing", missing}, {"complete", missing == 0}};
  return index;
}

void write_index(const std::string& dir, const json& index) {
  report::write_report(index, (fs::path(dir) / "sweep.json").string());
  const std::string csv = (fs::path(dir) / "sweep.csv").string();
  const std::string tmp = csv + ".tmp";
  {
    std::ofstream out(tmp);
    report::write_sweep_csv(out, index);
    if (!out) throw std::runtime_error("cannot write " + tmp);
  }
  fs::rename(tmp, csv);
}

int index_exit_status(const json& index) {
  const auto& s = index["summary"];
  if (s["failed"].get<int64_t>() > 0 || s["missing"].get<int64_t>() > 0) return kExitFailed;
  // Every point skipped: the subcommand refused them all (some only when
  // their job started), as it would exit 2 for each alone. Nothing was
  // measured, so the sweep is a usage error, never a success.
  if (s["ok"].get<int64_t>() == 0) return kExitUsage;
  return kExitOk;
}

}  // namespace gpuledger::cli
