// The regression gate (see regress_gate.h; the rules in docs/regress.md).
#include "bench/report/regress_gate.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "bench/checks.h"
#include "bench/report/fingerprint.h"
#include "bench/report/gate_stats.h"
#include "core/account.h"
#include "core/model_config.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

// A required node of a report by its JSON path; a report without it is not one
// this gate can read (bad input: exit 2).
const json& need(const json& doc, std::initializer_list<const char*> path, const std::string& which) {
  const json* node = &doc;
  std::string where;
  for (const char* key : path) {
    where += where.empty() ? key : std::string(".") + key;
    if (!node->is_object() || !node->contains(key))
      throw ConfigError("report", fmt::format("{}: {} is missing (not a gpuledger train report?)", which, where));
    node = &(*node)[key];
  }
  return *node;
}

std::string side_name(const char* side, size_t i, size_t n) {
  return n == 1 ? std::string(side) : fmt::format("{} {}", side, i + 1);
}

// Every setting of config.{model,layout,run,train} that differs, "section.key: a vs b".
std::string config_differences(const json& a, const json& b, const char* a_name, const char* b_name) {
  std::string differ;
  for (const char* section : {"model", "layout", "run", "train"}) {
    const json c = a.value(section, json());
    const json d = b.value(section, json());
    if (c == d) continue;
    if (!c.is_object() || !d.is_object()) {
      differ += fmt::format("\n  {}: {} vs {}", section, c.dump(), d.dump());
      continue;
    }
    std::set<std::string> keys;
    for (const auto& [k, v] : c.items()) keys.insert(k);
    for (const auto& [k, v] : d.items()) keys.insert(k);
    for (const auto& k : keys) {
      const std::string cv = c.contains(k) ? c[k].dump() : "(absent)";
      const std::string dv = d.contains(k) ? d[k].dump() : "(absent: recorded before this setting existed)";
      if (cv != dv) differ += fmt::format("\n  {}.{}: {} {} vs {} {}", section, k, a_name, cv, b_name, dv);
    }
  }
  return differ;
}

// The two sides are one point, or ConfigError says why not; false when the
// machines differ and that is allowed.
bool require_same_point(const std::vector<json>& cur, const std::vector<json>& base, const GateOptions& o,
                        GateResult& g) {
  if (cur.empty() || base.empty()) throw ConfigError("report", "regress needs at least one report and one baseline");
  for (const auto* side : {&cur, &base})
    for (size_t i = 0; i < side->size(); ++i) {
      const std::string which = side_name(side == &cur ? "report" : "baseline", i, side->size());
      if (need((*side)[i], {"kind"}, which) != "train")
        throw ConfigError("report",
                          which + " is a " + (*side)[i]["kind"].dump() + " report; regress gates train reports");
      need((*side)[i], {"config"}, which);
      const std::string d = config_differences(cur[0]["config"], (*side)[i]["config"], "report", which.c_str());
      if (!d.empty() && side == &cur)
        throw ConfigError("report", "the reports are not repetitions of one configuration:" + d);
      if (!d.empty())
        throw ConfigError("baseline",
                          "the report and the baseline are not the same configuration; re-record the baseline "
                          "(scripts/regress_nightly.sh --update) if the change is intended:" +
                              d);
    }
  const json fc = cur[0].value("env", json::object()).value("fingerprint", json());
  const json fb = base[0].value("env", json::object()).value("fingerprint", json());
  std::vector<std::string> diff =
      fb.is_null() ? std::vector<std::string>{"the baseline has no fingerprint"} : fingerprint_differences(fb, fc);
  if (diff.empty()) return true;
  std::string list;
  for (const auto& d : diff) list += "\n  " + d;
  if (!o.allow_other_machine)
    throw ConfigError("baseline",
                      "the baseline was recorded on another machine (fingerprint baseline vs report):" + list +
                          "\nre-record it here, or pass --allow-other-machine to gate bytes and loss only");
  g.notes.push_back("other machine: MFU and tokens/s not gated (fingerprint baseline vs report:" + list + ")");
  return false;
}

void add(GateResult& g, json check, const std::string& what_changed) {
  if (!check["ok"].get<bool>()) g.regressions.push_back(what_changed);
  g.checks.push_back(std::move(check));
}

// The new reports passed their own checks (the measured ledger equals the exact budget).
void gate_own_status(const std::vector<json>& cur, GateResult& g) {
  for (size_t i = 0; i < cur.size(); ++i) {
    const std::string which = side_name("report", i, cur.size());
    const std::string status = cur[i].value("status", "?");
    json c = bench::make_check("report.status", -1, status == "ok" ? 1 : 0, 1, 0);
    add(g, c, fmt::format("{} failed: status {} ({})", which, status, cur[i].value("error", "")));
    size_t failed = 0;
    for (const auto& chk : cur[i].value("checks", json::array())) failed += chk.value("ok", false) ? 0 : 1;
    add(g, bench::make_check("report.checks_failed", -1, static_cast<double>(failed), 0, 0),
        fmt::format("{}: {} of its own checks failed", which, failed));
  }
}

void gate_loss(const json& cur, const json& base, const GateOptions& o, GateResult& g) {
  const json& lc = need(cur, {"summary", "loss"}, "report");
  const json& lb = need(base, {"summary", "loss"}, "baseline");
  const std::string dtype = base["config"].value("run", json::object()).value("dtype", "fp32");
  const double tol = o.loss_tol.value_or(loss_tolerance(dtype));
  if (lc.size() != lb.size()) {
    add(g, bench::make_check("loss.steps", -1, static_cast<double>(lc.size()), static_cast<double>(lb.size()), 0),
        fmt::format("loss: {} steps vs the baseline's {}", lc.size(), lb.size()));
    return;
  }
  for (size_t i = 0; i < lb.size(); ++i) {
    const std::string name = fmt::format("loss[step {}]", i);
    if (lb[i].is_null() || lc[i].is_null()) {  // not a number (written as null): equal only to itself
      add(g, bench::make_check(name, -1, lc[i].is_null() ? 1 : 0, lb[i].is_null() ? 1 : 0, 0),
          fmt::format("loss at step {}: {} vs baseline {}", i, lc[i].dump(), lb[i].dump()));
      continue;
    }
    const double c = lc[i].get<double>(), b = lb[i].get<double>();
    json chk = bench::make_check(name, -1, c, b, tol);
    chk["ok"] = std::fabs(c - b) <= tol * std::max(1.0, std::fabs(b));
    chk["note"] = fmt::format("{} tolerance {:g} × max(1, |baseline|)", dtype, tol);
    add(g, chk,
        fmt::format("loss at step {}: {:.6f} vs baseline {:.6f} (|Δ| {:.3g} > {} tolerance {:g})", i, c, b,
                    std::fabs(c - b), dtype, tol));
  }
}

void exact(GateResult& g, const std::string& name, int64_t rank, const json& c, const json& b) {
  const double cv = c.is_number() ? c.get<double>() : -1, bv = b.is_number() ? b.get<double>() : -1;
  json chk = bench::make_check(name, rank, cv, bv, 0);
  chk["ok"] = c == b;
  add(g, chk,
      fmt::format("{} on rank {}: {} vs baseline {} ({:+} bytes)", name, rank, c.is_null() ? "(absent)" : c.dump(),
                  b.is_null() ? "(absent)" : b.dump(), c.is_number() && b.is_number() ? cv - bv : 0.0));
}

// Each rank's peak bytes per account and in total, and comm bytes per collective: exact.
void gate_bytes(const json& cur, const json& base, GateResult& g) {
  const json& rb = need(base, {"ranks"}, "baseline");
  const json& rc = need(cur, {"ranks"}, "report");
  for (const auto& b : rb) {
    const int64_t rank = b.value("rank", -1);
    const json* c = nullptr;
    for (const auto& r : rc)
      if (r.value("rank", -2) == rank) c = &r;
    if (!c) {
      add(g, bench::make_check("ranks", rank, 0, 1, 0), fmt::format("rank {} is not in the report", rank));
      continue;
    }
    const json& mb = need(b, {"measured", "peak_by_account"}, "baseline");
    const json& mc = need(*c, {"measured", "peak_by_account"}, "report");
    for (auto account : kAccountNames) {
      const std::string a(account);
      exact(g, "peak_bytes." + a, rank, mc.value(a, json()), mb.value(a, json()));
    }
    exact(g, "peak_bytes", rank, (*c)["measured"].value("peak_bytes", json()),
          b["measured"].value("peak_bytes", json()));
    const json cb = c->value("comm", json::object()), bb = b.value("comm", json::object());
    std::set<std::string> keys;
    for (const auto& [k, v] : cb.items()) keys.insert(k);
    for (const auto& [k, v] : bb.items()) keys.insert(k);
    for (const auto& k : keys)
      exact(g, "comm_bytes." + k, rank, cb.contains(k) ? cb[k].value("bytes", json()) : json(),
            bb.contains(k) ? bb[k].value("bytes", json()) : json());
  }
}

// MFU and tokens/s: higher is better; the rule of docs/regress.md "Timing".
void gate_timing(const std::vector<json>& cur, const std::vector<json>& base, const GateOptions& o, GateResult& g) {
  for (const char* name : {"mfu", "tokens_per_s"}) {
    const auto c = figure_samples(cur, name), b = figure_samples(base, name);
    if (c.empty() || b.empty()) {
      g.notes.push_back(fmt::format("{} not gated: {} has none", name, c.empty() ? "the report" : "baseline"));
      continue;
    }
    const double mc = median_of(c), mb = median_of(b);
    const double drop = mb > 0 ? 1.0 - mc / mb : 0.0;
    const double allowed = std::max(o.perf_tol, relative_spread(b));
    const bool utest = static_cast<int64_t>(c.size()) >= kUTestMinRepetitions &&
                       static_cast<int64_t>(b.size()) >= kUTestMinRepetitions;
    const double p = utest ? mann_whitney_p_lower(c, b) : 1.0;
    json chk = bench::make_check(std::string("median ") + name, -1, mc, mb, allowed);
    chk["kind"] = "lower_bound";
    chk["expected"] = mb * (1.0 - allowed);
    chk["ok"] = !(drop > allowed && (!utest || p < o.alpha));
    chk["samples"] = c;
    chk["baseline_samples"] = b;
    chk["u_test_p"] = utest ? json(p) : json(nullptr);
    chk["note"] = fmt::format("median of {} vs {} repetitions; allowed drop max(tol {:g}, baseline spread {:.3g}){}",
                              c.size(), b.size(), o.perf_tol, relative_spread(b),
                              utest ? fmt::format("; U test p {:.3g}", p) : std::string("; too few for a U test"));
    add(g, chk,
        fmt::format("{}: median {:.4g} vs baseline {:.4g} ({:+.1f}%, allowed −{:.1f}%{})", name, mc, mb, -drop * 100,
                    allowed * 100, utest ? fmt::format(", U test p {:.3g} < {:g}", p, o.alpha) : std::string()));
  }
}

json side_metrics(const std::vector<json>& cur) {
  json m;
  for (const char* name : {"mfu", "tokens_per_s"}) {
    const auto s = figure_samples(cur, name);
    m[name] = s.empty() ? json(nullptr) : json({{"median", median_of(s)}, {"samples", s}});
  }
  int64_t peak = 0;
  for (const auto& r : cur[0].value("ranks", json::array()))
    peak = std::max<int64_t>(peak, r.contains("measured") ? r["measured"].value("peak_bytes", int64_t{0}) : 0);
  m["peak_bytes"] = peak;
  const json loss = cur[0].contains("summary") ? cur[0]["summary"].value("loss", json::array()) : json::array();
  m["final_loss"] = loss.empty() ? json(nullptr) : loss.back();
  return m;
}

}  // namespace

double loss_tolerance(const std::string& dtype) {
  if (dtype == "bf16") return 1e-2;
  if (dtype == "fp16") return 1e-3;
  return 1e-5;
}

std::vector<double> figure_samples(const std::vector<json>& side, const std::string& name) {
  std::vector<double> v;
  for (const auto& doc : side) {
    if (!doc.contains("summary")) continue;
    const json& s = doc["summary"];
    if (s.contains("repeats") && s["repeats"].is_array()) {
      for (const auto& r : s["repeats"])
        if (r.contains(name) && r[name].is_number()) v.push_back(r[name].get<double>());
    } else if (s.contains(name) && s[name].is_number()) {
      v.push_back(s[name].get<double>());
    }
  }
  return v;
}

GateResult run_gate(const std::vector<json>& current, const std::vector<json>& baseline, const GateOptions& o) {
  GateResult g;
  const bool same_machine = require_same_point(current, baseline, o, g);
  gate_own_status(current, g);
  gate_loss(current[0], baseline[0], o, g);
  gate_bytes(current[0], baseline[0], g);
  const bool meta = current[0].value("env", json::object()).value("backend", "") == "meta";
  if (meta)
    g.notes.push_back("meta backend: MFU and tokens/s not gated (its step time is bookkeeping, not a measurement)");
  else if (same_machine)
    gate_timing(current, baseline, o, g);
  g.metrics = side_metrics(current);
  return g;
}

}  // namespace gpuledger::report
