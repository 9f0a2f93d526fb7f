// The regression gate (see regress_gate.h; the rules in docs/regress.md).
// Every figure is read through the checked reader (report_reader.h), so a
// report with a field missing or of the wrong type is named, file and JSON
// path, as bad input.
#include "bench/report/regress_gate.h"

#include <fmt/format.h>

#include <cmath>
#include <set>

#include "bench/report/checks.h"
#include "bench/report/fingerprint.h"
#include "bench/report/gate_stats.h"
#include "core/account.h"
#include "core/model_config.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

std::string side_name(const char* side, size_t i, size_t n) {
  return n == 1 ? std::string(side) : fmt::format("{} {}", side, i + 1);
}

// Every setting of config.{model,layout,run,train} that differs, "section.key: a vs b".
std::string config_differences(const json& a, const json& b, const std::string& a_name, const std::string& b_name) {
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

json fingerprint_of(const ReportFile& r) {
  const auto env = r.root().find("env");
  const auto f = env ? env->find("fingerprint") : std::nullopt;
  return f ? f->raw() : json();
}

// The two sides are one point, or ConfigError says why not; false when the
// machines differ and that is allowed.
bool require_same_point(const std::vector<ReportFile>& cur, const std::vector<ReportFile>& base, const GateOptions& o,
                        GateResult& g) {
  if (cur.empty() || base.empty()) throw ConfigError("report", "regress needs at least one report and one baseline");
  for (const auto* side : {&cur, &base})
    for (size_t i = 0; i < side->size(); ++i) {
      const bool is_cur = side == &cur;
      const ReportFile& r = (*side)[i];
      if (r.kind() != "train")
        throw ConfigError("report", r.file + " is a " + r.kind() + " report; regress gates train reports");
      const std::string which = side_name(is_cur ? "report" : "baseline", i, side->size());
      const std::string d =
          config_differences(cur[0].root().at("config").raw(), r.root().at("config").raw(), "report", which);
      if (!d.empty() && is_cur)
        throw ConfigError("report", "the reports are not repetitions of one configuration:" + d);
      if (!d.empty())
        throw ConfigError("baseline",
                          "the report and the baseline are not the same configuration; re-record the baseline "
                          "(scripts/regress_nightly.sh --update) if the change is intended:" +
                              d);
    }
  const json fc = fingerprint_of(cur[0]), fb = fingerprint_of(base[0]);
  const std::vector<std::string> diff =
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
void gate_own_status(const std::vector<ReportFile>& cur, GateResult& g) {
  for (size_t i = 0; i < cur.size(); ++i) {
    const std::string which = side_name("report", i, cur.size());
    const JsonView root = cur[i].root();
    const std::string status = root.string_or("status", "ok");
    add(g, bench::make_check("report.status", -1, status == "ok" ? 1 : 0, 1, 0),
        fmt::format("{} failed: status {} ({})", which, status, root.string_or("error", "")));
    size_t failed = 0;
    if (const auto checks = root.find("checks"))
      for (const auto& c : checks->elements()) failed += c.at("ok").boolean() ? 0 : 1;
    add(g, bench::make_check("report.checks_failed", -1, static_cast<double>(failed), 0, 0),
        fmt::format("{}: {} of its own checks failed", which, failed));
  }
}

void gate_loss(const ReportFile& cur, const ReportFile& base, const GateOptions& o, GateResult& g) {
  const std::vector<JsonView> lc = cur.root().at("summary").at("loss").elements();
  const std::vector<JsonView> lb = base.root().at("summary").at("loss").elements();
  const std::string dtype = base.root().at("config").at("run").string_or("dtype", "fp32");
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
          fmt::format("loss at step {}: {} vs baseline {}", i, lc[i].raw().dump(), lb[i].raw().dump()));
      continue;
    }
    const double c = lc[i].number(), b = lb[i].number();
    json chk = bench::make_check(name, -1, c, b, tol);
    chk["ok"] = std::fabs(c - b) <= tol * std::max(1.0, std::fabs(b));
    chk["note"] = fmt::format("{} tolerance {:g} × max(1, |baseline|)", dtype, tol);
    add(g, chk,
        fmt::format("loss at step {}: {:.6f} vs baseline {:.6f} (|Δ| {:.3g} > {} tolerance {:g})", i, c, b,
                    std::fabs(c - b), dtype, tol));
  }
}

void exact(GateResult& g, const std::string& name, int64_t rank, std::optional<int64_t> c, std::optional<int64_t> b) {
  const auto show = [](std::optional<int64_t> v) { return v ? std::to_string(*v) : std::string("(absent)"); };
  json chk = bench::make_check(name, rank, static_cast<double>(c.value_or(-1)), static_cast<double>(b.value_or(-1)), 0);
  chk["ok"] = c == b;
  add(g, chk,
      fmt::format("{} on rank {}: {} vs baseline {} ({:+} bytes)", name, rank, show(c), show(b), c && b ? *c - *b : 0));
}

std::optional<int64_t> integer_at(const std::optional<JsonView>& object, std::string_view key) {
  if (!object) return std::nullopt;
  const auto v = object->find(key);
  return v ? std::optional<int64_t>(v->integer()) : std::nullopt;
}

// Each rank's peak bytes per account and in total, and comm bytes per collective: exact.
void gate_bytes(const ReportFile& cur, const ReportFile& base, GateResult& g) {
  const JsonView rb = base.root().at("ranks"), rc = cur.root().at("ranks");
  if (rb.size() == 0) rb.fail("no ranks: nothing to compare");
  if (rc.size() == 0) rc.fail("no ranks: nothing to compare");
  for (const auto& b : rb.elements()) {
    const int64_t rank = b.at("rank").integer();
    std::optional<JsonView> c;
    for (const auto& r : rc.elements())
      if (r.at("rank").integer() == rank) c = r;
    if (!c) {
      add(g, bench::make_check("ranks", rank, 0, 1, 0), fmt::format("rank {} is not in the report", rank));
      continue;
    }
    const JsonView mb = b.at("measured"), mc = c->at("measured");
    const auto ab = mb.at("peak_by_account"), ac = mc.at("peak_by_account");
    for (auto account : kAccountNames) {
      // A baseline written before the host account existed held no host memory.
      const auto absent_as = [&](std::optional<int64_t> v) {
        return !v && account == account_name(Account::kHost) ? std::optional<int64_t>(0) : v;
      };
      exact(g, "peak_bytes." + std::string(account), rank, absent_as(integer_at(ac, account)),
            absent_as(integer_at(ab, account)));
    }
    exact(g, "peak_bytes", rank, mc.at("peak_bytes").integer(), mb.at("peak_bytes").integer());
    const auto cb = c->find("comm"), bb = b.find("comm");
    std::set<std::string> keys;
    for (const auto* side : {&cb, &bb})
      if (*side)
        for (const auto& [k, v] : (*side)->members()) keys.insert(k);
    for (const auto& k : keys) {
      const auto ck = cb ? cb->find(k) : std::nullopt, bk = bb ? bb->find(k) : std::nullopt;
      exact(g, "comm_bytes." + k, rank, integer_at(ck, "bytes"), integer_at(bk, "bytes"));
    }
  }
}

// One report's samples of a summary figure: each repetition's, or the summary's own.
void append_figure_samples(const ReportFile& r, const std::string& name, std::vector<double>& v) {
  const auto s = r.root().find("summary");
  if (!s) return;
  if (const auto repeats = s->find("repeats")) {
    for (const auto& rep : repeats->elements())
      if (const auto x = rep.find(name)) v.push_back(x->number());
  } else if (const auto x = s->find(name)) {
    v.push_back(x->number());
  }
}

std::optional<double> peak_flops_of(const ReportFile& r) {
  const auto s = r.root().find("summary");
  const auto p = s ? s->find("peak_flops") : std::nullopt;
  if (!p || p->raw().is_null()) return std::nullopt;
  const double v = p->number();
  return v > 0 ? std::optional<double>(v) : std::nullopt;
}

// Each report's MFU samples re-expressed against ref_peak: mfu × its own peak / ref_peak.
// A report without a peak keeps its figure.
std::vector<double> mfu_samples_against(const std::vector<ReportFile>& side, double ref_peak) {
  std::vector<double> v;
  for (const auto& r : side) {
    const double scale = peak_flops_of(r).value_or(ref_peak) / ref_peak;
    const size_t first = v.size();
    append_figure_samples(r, "mfu", v);
    for (size_t i = first; i < v.size(); ++i) v[i] *= scale;
  }
  return v;
}

// MFU and tokens/s: higher is better; the rule of docs/regress.md "Timing".
void gate_timing(const std::vector<ReportFile>& cur, const std::vector<ReportFile>& base, const GateOptions& o,
                 GateResult& g) {
  // MFU on both sides against the baseline's peak: each run measures its own
  // CPU peak, and that measurement's noise is not the code's regression. For
  // the same point on the same machine this compares achieved FLOP/s.
  const std::optional<double> ref_peak = peak_flops_of(base[0]);
  for (const char* name : {"mfu", "tokens_per_s"}) {
    const bool rebase = std::string(name) == "mfu" && ref_peak;
    const auto c = rebase ? mfu_samples_against(cur, *ref_peak) : figure_samples(cur, name);
    const auto b = rebase ? mfu_samples_against(base, *ref_peak) : figure_samples(base, name);
    if (c.empty() || b.empty()) {
      g.notes.push_back(fmt::format("{} not gated: {} has none", name, c.empty() ? "the report" : "the baseline"));
      continue;
    }
    const double mc = median_of(c), mb = median_of(b), spread = relative_spread(b);
    const double drop = mb > 0 ? 1.0 - mc / mb : 0.0;
    const double allowed = std::max(o.perf_tol, spread);
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
    chk["note"] = fmt::format(
        "median of {} vs {} repetitions; allowed drop max(tol {:g}, baseline spread {:.3g}){}{}", c.size(), b.size(),
        o.perf_tol, spread, utest ? fmt::format("; U test p {:.3g}", p) : std::string("; too few for a U test"),
        rebase ? fmt::format("; both sides against the baseline's peak {:.4g} FLOP/s", *ref_peak) : std::string());
    add(g, chk,
        fmt::format("{}: median {:.4g} vs baseline {:.4g} ({:+.1f}%, allowed −{:.1f}%{})", name, mc, mb, -drop * 100,
                    allowed * 100, utest ? fmt::format(", U test p {:.3g} < {:g}", p, o.alpha) : std::string()));
  }
}

json side_metrics(const std::vector<ReportFile>& cur) {
  json m;
  for (const char* name : {"mfu", "tokens_per_s"}) {
    const auto s = figure_samples(cur, name);
    m[name] = s.empty() ? json(nullptr) : json({{"median", median_of(s)}, {"samples", s}});
  }
  int64_t peak = 0;
  for (const auto& r : cur[0].root().at("ranks").elements())
    peak = std::max(peak, r.at("measured").at("peak_bytes").integer());
  m["peak_bytes"] = peak;
  const auto loss = cur[0].root().at("summary").at("loss").elements();
  m["final_loss"] = loss.empty() ? json(nullptr) : loss.back().raw();
  return m;
}

}  // namespace

double loss_tolerance(const std::string& dtype) {
  if (dtype == "bf16") return 1e-2;
  if (dtype == "fp16") return 1e-3;
  return 1e-5;
}

std::vector<double> figure_samples(const std::vector<ReportFile>& side, const std::string& name) {
  std::vector<double> v;
  for (const auto& r : side) append_figure_samples(r, name, v);
  return v;
}

namespace {

// The shape every gated report must have, checked before anything is
// compared, so that a malformed file is named as such (exit 2, with its JSON
// path) rather than reported as another machine or another configuration.
void require_report_shape(const ReportFile& r) {
  const JsonView ranks = r.root().at("ranks");
  if (ranks.size() == 0) ranks.fail("no ranks: nothing to compare");
  for (const auto& rank : ranks.elements()) {
    rank.at("rank").integer();
    if (const auto measured = rank.find("measured")) measured->at("peak_bytes").number();
  }
}

}  // namespace

GateResult run_gate(const std::vector<ReportFile>& current, const std::vector<ReportFile>& baseline,
                    const GateOptions& o) {
  for (const auto& r : current) require_report_shape(r);
  for (const auto& r : baseline) require_report_shape(r);
  GateResult g;
  const bool same_machine = require_same_point(current, baseline, o, g);
  gate_own_status(current, g);
  gate_loss(current[0], baseline[0], o, g);
  gate_bytes(current[0], baseline[0], g);
  const auto env = current[0].root().find("env");
  const bool meta = env && env->string_or("backend", "") == "meta";
  if (meta)
    g.notes.push_back("meta backend: MFU and tokens/s not gated (its step time is bookkeeping, not a measurement)");
  else if (same_machine)
    gate_timing(current, baseline, o, g);
  g.metrics = side_metrics(current);
  if (meta) g.metrics["mfu"] = g.metrics["tokens_per_s"] = nullptr;  // not measurements: not in the history
  return g;
}

}  // namespace gpuledger::report
