// Measured-vs-analytic checks (see checks.h).
#include "bench/checks.h"

#include <cmath>
#include <set>

#include "core/account.h"

namespace gpuledger::bench {

using nlohmann::json;

json make_check(const std::string& name, int64_t rank, double measured, double expected, double tol) {
  const double rel = expected != 0 ? (measured - expected) / expected : (measured == 0 ? 0.0 : INFINITY);
  return {{"name", name},
          {"rank", rank},
          {"measured", measured},
          {"expected", expected},
          {"rel_err", std::isfinite(rel) ? json(rel) : json(nullptr)},
          {"tol", tol},
          {"ok", std::isfinite(rel) && std::fabs(rel) <= tol}};
}

json make_bound_check(const std::string& name, int64_t rank, double measured, double bound) {
  return {{"name", name},
          {"rank", rank},
          {"measured", measured},
          {"expected", bound},
          {"rel_err", bound != 0 ? json((measured - bound) / bound) : json(nullptr)},
          {"tol", 0.0},
          {"kind", "upper_bound"},
          {"ok", measured <= bound}};
}

json rank_checks(const json& r) {
  json checks = json::array();
  const int64_t rank = r["rank"].get<int64_t>();
  const auto& measured = r["measured"]["peak_by_account"];
  const auto& exact = r["analytic"]["exact"];
  for (auto name : kAccountNames) {
    const std::string a(name);
    const double m = measured.value(a, 0.0);
    const double e = exact.value(a, 0.0);
    if (a == "workspace")
      checks.push_back(make_bound_check("bytes.workspace<=bound", rank, m, e));
    else
      checks.push_back(make_check("bytes." + a, rank, m, e, 0.0));
  }
  // Communication: every collective@group the budget or the measurement names,
  // calls and bytes per step (the measurement covers the whole run: divided by
  // its steps), to the byte.
  if (r.contains("comm") && r["analytic"].contains("comm") && r.contains("time")) {
    const double steps = static_cast<double>(r["time"]["step_ms"].size());
    if (steps > 0) {
      std::set<std::string> keys;
      for (const auto& [k, v] : r["comm"].items()) keys.insert(k);
      for (const auto& [k, v] : r["analytic"]["comm"].items()) keys.insert(k);
      for (const auto& k : keys) {
        const json zero = {{"calls", 0}, {"bytes", 0}};
        const json& m = r["comm"].contains(k) ? r["comm"][k] : zero;
        const json& a = r["analytic"]["comm"].contains(k) ? r["analytic"]["comm"][k] : zero;
        checks.push_back(
            make_check("comm." + k + ".calls", rank, m["calls"].get<double>() / steps, a["calls"].get<double>(), 0.0));
        checks.push_back(
            make_check("comm." + k + ".bytes", rank, m["bytes"].get<double>() / steps, a["bytes"].get<double>(), 0.0));
      }
    }
  }
  if (r.contains("flops") && r["flops"].contains("executed_per_step"))
    checks.push_back(make_check("flops.executed==analytic_hardware", rank,
                                r["flops"]["executed_per_step"].get<double>(),
                                r["flops"]["analytic_hardware"].get<double>(), 0.0));
  return checks;
}

bool all_ok(const json& checks) {
  for (const auto& c : checks)
    if (!c["ok"].get<bool>()) return false;
  return true;
}

}  // namespace gpuledger::bench
