// Measured-vs-analytic checks (see checks.h).
#include "bench/report/checks.h"

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

json rank_checks(const report::JsonView& r) {
  json checks = json::array();
  const int64_t rank = r.at("rank").integer();
  const report::JsonView measured = r.at("measured").at("peak_by_account");
  const report::JsonView analytic = r.at("analytic");
  const report::JsonView exact = analytic.at("exact");
  for (auto name : kAccountNames) {
    const std::string a(name);
    const double m = measured.number_or(a, 0.0);
    const double e = exact.number_or(a, 0.0);
    if (a == "workspace")
      checks.push_back(make_bound_check("bytes.workspace<=bound", rank, m, e));
    else
      checks.push_back(make_check("bytes." + a, rank, m, e, 0.0));
  }
  // Communication: every collective@group the budget or the measurement names,
  // calls and bytes per step (the measurement covers the whole run: divided by
  // its steps), to the byte.
  const auto comm = r.find("comm"), analytic_comm = analytic.find("comm"), time = r.find("time");
  if (comm && analytic_comm && time) {
    const double steps = static_cast<double>(time->at("step_ms").size());
    if (steps > 0) {
      std::set<std::string> keys;
      for (const auto& [k, v] : comm->members()) keys.insert(k);
      for (const auto& [k, v] : analytic_comm->members()) keys.insert(k);
      for (const auto& k : keys) {
        const auto m = comm->find(k), a = analytic_comm->find(k);
        for (const char* what : {"calls", "bytes"}) {
          const double measured_per_step = m ? m->at(what).number() / steps : 0.0;
          const double expected = a ? a->at(what).number() : 0.0;
          checks.push_back(make_check("comm." + k + "." + what, rank, measured_per_step, expected, 0.0));
        }
      }
    }
  }
  if (const auto flops = r.find("flops"); flops && flops->has("executed_per_step"))
    checks.push_back(make_check("flops.executed==analytic_hardware", rank, flops->at("executed_per_step").number(),
                                flops->at("analytic_hardware").number(), 0.0));
  return checks;
}

bool all_ok(const json& checks) {
  for (const auto& c : checks)
    if (!c["ok"].get<bool>()) return false;
  return true;
}

}  // namespace gpuledger::bench
