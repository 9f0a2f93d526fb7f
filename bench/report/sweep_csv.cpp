// The sweep's CSV (see sweep_csv.h).
#include "bench/report/sweep_csv.h"

#include <fmt/format.h>

#include <algorithm>
#include <array>
#include <cstdlib>
#include <vector>

namespace gpuledger::report {

using nlohmann::json;

std::string csv_cell(const json& v) {
  if (v.is_null()) return "";
  if (v.is_boolean()) return v.get<bool>() ? "true" : "false";
  if (v.is_number_integer()) return std::to_string(v.get<int64_t>());
  if (v.is_number()) return fmt::format("{}", v.get<double>());  // shortest round-trip form
  const std::string s = v.is_string() ? v.get<std::string>() : v.dump();
  if (s.find_first_of(",\"\n\r") == std::string::npos) return s;
  std::string q = "\"";
  for (char c : s) q += c == '"' ? std::string("\"\"") : std::string(1, c);
  return q + "\"";
}

json typed_value(const std::string& text) {
  if (text.empty()) return text;
  char* end = nullptr;
  if (text.find_first_not_of("0123456789-") == std::string::npos) {
    const long long i = std::strtoll(text.c_str(), &end, 10);
    if (*end == '\0') return static_cast<int64_t>(i);
  }
  const double d = std::strtod(text.c_str(), &end);
  if (*end == '\0' && text.find_first_not_of("0123456789.eE+-") == std::string::npos) return d;
  return text;
}

namespace {

// Appends ",cell" (GCC 12 warns falsely on chains of "," + std::string at -O3).
void add(std::string& row, const std::string& cell) {
  row.push_back(',');
  row.append(cell);
}

}  // namespace

void write_sweep_csv(std::ostream& os, const json& index) {
  std::vector<std::string> keys;  // the grid keys in --grid order (layout=auto: dp, tp, pp)
  for (const auto& a : index.value("grid", json::array())) {
    const std::string k = a.value("key", std::string());
    if (k == "layout")
      keys.insert(keys.end(), {"dp", "tp", "pp"});
    else if (!k.empty())
      keys.push_back(k);
  }
  for (const auto& p : index["points"]) {
    if (!p.contains("values")) continue;
    for (auto it = p["values"].begin(); it != p["values"].end(); ++it)
      if (std::find(keys.begin(), keys.end(), it.key()) == keys.end()) keys.push_back(it.key());
  }
  // (column, headline key)
  std::vector<std::array<std::string, 2>> figures = {{"peak_bytes_first_stage", "peak_bytes_first_stage"},
                                                     {"peak_bytes_middle_stages", "peak_bytes_middle_stages"},
                                                     {"peak_bytes_last_stage", "peak_bytes_last_stage"},
                                                     {"peak_bytes", "peak_bytes"},
                                                     {"budget_peak_bytes", "budget_peak_bytes"},
                                                     {"tokens_per_s", "tokens_per_s"},
                                                     {"mfu", "mfu"},
                                                     {"hfu", "hfu"},
                                                     {"step_ms", "median_step_ms"},
                                                     {"checks_failed", "checks_failed"},
                                                     {"loss", "loss"}};
  // A layout search (train on meta with a profile): the predicted step of each point too.
  const auto& pts = index["points"];
  if (std::any_of(pts.begin(), pts.end(), [](const json& p) {
        return p.contains("headline") && p["headline"].contains("predicted_tokens_per_s");
      }))
    figures.insert(figures.end(), {{"predicted_step_ms", "predicted_step_ms"},
                                   {"predicted_tokens_per_s", "predicted_tokens_per_s"},
                                   {"predicted_mfu", "predicted_mfu"}});
  std::string head = "index,name";
  for (const auto& k : keys) add(head, csv_cell(k));
  add(head, "status");
  for (const auto& f : figures) add(head, f[0]);
  add(head, "seconds");
  add(head, "reason");
  os << head << "\n";
  const json none;
  for (const auto& p : index["points"]) {
    std::string row = csv_cell(p.contains("index") ? p["index"] : none);
    add(row, csv_cell(p["name"]));
    for (const auto& k : keys)
      add(row, p.contains("values") && p["values"].contains(k) ? csv_cell(typed_value(p["values"][k])) : "");
    add(row, csv_cell(p["status"]));
    for (const auto& f : figures)
      add(row, p.contains("headline") && p["headline"].contains(f[1]) ? csv_cell(p["headline"][f[1]]) : "");
    add(row, csv_cell(p.contains("seconds") ? p["seconds"] : none));
    add(row, csv_cell(p.contains("reason") ? p["reason"] : p.contains("error") ? p["error"] : none));
    os << row << "\n";
  }
}

}  // namespace gpuledger::report
