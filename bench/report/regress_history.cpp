// The gate's history lines (see regress_history.h).
#include "bench/report/regress_history.h"

#include <filesystem>
#include <fstream>
#include <stdexcept>

#include "bench/report/fingerprint.h"

namespace gpuledger::report {

using nlohmann::json;

json history_line(const std::string& point, const json& report, const GateResult& g) {
  const json env = report.value("env", json::object());
  return {{"when_utc", env.value("when_utc", utc_timestamp())},
          {"point", point},
          {"commit", report.contains("tool") ? report["tool"].value("git", "unknown") : "unknown"},
          {"host", env.value("host", "")},
          {"job_id", env.value("job_id", json())},
          {"fingerprint", env.value("fingerprint", json())},
          {"status", g.ok() ? "ok" : "failed"},
          {"metrics", g.metrics},
          {"regressions", g.regressions}};
}

void append_history(const std::string& path, const json& line) {
  const std::filesystem::path p(path);
  if (p.has_parent_path()) std::filesystem::create_directories(p.parent_path());
  std::ofstream out(p, std::ios::app);
  if (!out) throw std::runtime_error("cannot open the history file " + path);
  // One write of the whole line: concurrent appenders (O_APPEND) do not interleave within it.
  out << line.dump() + "\n";
  out.flush();
  if (!out) throw std::runtime_error("appending to the history file " + path + " failed");
}

}  // namespace gpuledger::report
