// Train report tables (see train_tables.h).
#include "bench/report/train_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/report/format.h"
#include "bench/report/table.h"
#include "core/account.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {
std::string b(double v) { return v == 0 ? std::string("0") : format_bytes(v); }
}  // namespace

namespace {
// Byte and FLOP counts print as integers; ratios (MFU) and rates as 4 significant digits.
std::string check_value(double v) {
  if (std::fabs(v) >= 1000 || v == std::floor(v)) return format_count(static_cast<int64_t>(v));
  return fmt::format("{:.4g}", v);
}
}  // namespace

void print_checks(std::ostream& os, const json& checks) {
  Table t("checks (measured vs analytic)");
  t.columns({"check", "rank", "measured", "expected", "rel err", "tol", "result"});
  int failed = 0;
  for (const auto& c : checks) {
    const bool ok = c["ok"].get<bool>();
    failed += ok ? 0 : 1;
    const bool bound = c.value("kind", "") == "upper_bound";
    t.row({c["name"].get<std::string>(), std::to_string(c["rank"].get<int64_t>()),
           check_value(c["measured"].get<double>()),
           (bound                                  ? "≤ "
            : c.value("kind", "") == "lower_bound" ? "≥ "
                                                   : "") +
               check_value(c["expected"].get<double>()),
           c["rel_err"].is_null() ? "-" : fmt::format("{:+.2e}", c["rel_err"].get<double>()),
           bound ? "bound" : fmt::format("{:g}", c["tol"].get<double>()), ok ? "ok" : "FAIL"});
  }
  t.note(fmt::format("{} checks, {} failed", checks.size(), failed));
  os << t.render();
}

namespace {

void print_rank_accounts(std::ostream& os, const json& r) {
  const auto& meas = r["measured"];
  const auto& exact = r["analytic"]["exact"];
  Table t(fmt::format("rank {} ({}): bytes by account — measured vs exact budget", r["rank"].get<int64_t>(),
                      r.value("role", std::string(""))));
  t.columns({"account", "measured peak", "at rank peak", "exact budget", "difference", "allocs"});
  const auto account_row = [&](Account acc, const std::string& label) {
    const std::string a(account_name(acc));
    const double mp = meas["peak_by_account"].value(a, 0.0);
    const double ex = exact.value(a, 0.0);
    t.row({label, b(mp), b(meas["at_peak"].value(a, 0.0)), b(ex),
           mp == ex ? "0" : fmt::format("{:+}", static_cast<int64_t>(mp - ex)),
           std::to_string(meas["alloc_count"].value(a, 0))});
  };
  for (Account acc : kAllAccounts)
    if (is_device_account(acc))
      account_row(acc, std::string(account_name(acc)) + (acc == Account::kWorkspace ? " (budget ≤)" : ""));
  t.rule();
  t.row({"device total", b(meas["peak_bytes"].get<double>()), b(meas["peak_bytes"].get<double>()),
         b(exact["total"].get<double>()), "", ""});
  account_row(Account::kHost, "host (not device memory)");
  t.note("measured peak = each account's own peak; at rank peak = the breakdown when the device total peaked");
  if (meas.contains("torch_caching_allocator")) {
    const auto& tc = meas["torch_caching_allocator"];
    t.note(
        fmt::format("as PyTorch's caching allocator would hold it (whole run): allocated peak {}, reserved peak {} "
                    "in {} segments, cuBLAS workspace {} included; the CUDA context comes on top",
                    b(tc["peak_allocated_bytes"].get<double>()), b(tc["peak_reserved_bytes"].get<double>()),
                    tc["segments"].get<int64_t>(), b(tc["cublas_workspace_bytes"].get<double>())));
  }
  os << "\n" << t.render();
}

void print_rank_published(std::ostream& os, const json& r, double doc_dp) {
  const auto& meas = r["measured"];
  Table pub("published formulas beside the measurement");
  pub.columns({"formula", "published", "measured", "difference", "compared with"});
  for (const auto& [name, p] : r["analytic"]["published"].items()) {
    if (!p.contains("exact")) continue;
    const std::string what = p["compares_to"].get<std::string>();
    double measured = 0;
    if (what == "model_states" || what == "model_states_device")
      for (auto a : {"weights", "grads", "master", "optim"}) measured += meas["peak_by_account"].value(a, 0.0);
    if (what == "model_states") measured += meas["peak_by_account"].value("host", 0.0);
    if (what == "host_per_node")  // every rank of the node holds the same
      measured = meas["peak_by_account"].value("host", 0.0) * doc_dp;
    else if (what == "activations")
      measured = meas["peak_by_account"].value("activations", 0.0);
    else
      measured = p["exact"].get<double>();  // per-layer figures: the exact count (the ledger books whole steps)
    pub.row({name, b(p["bytes"].get<double>()), b(measured),
             measured > 0 ? fmt::format("{:+.1f}%", 100.0 * (p["bytes"].get<double>() - measured) / measured) : "-",
             what});
  }
  os << "\n" << pub.render();
}

void print_op_time(std::ostream& os, const json& r) {
  if (r.contains("op_time")) {
    std::vector<std::pair<std::string, json>> ops;
    for (const auto& [name, t] : r["op_time"].items()) ops.emplace_back(name, t);
    std::sort(ops.begin(), ops.end(), [](const auto& a, const auto& b) {
      return a.second["seconds"].template get<double>() > b.second["seconds"].template get<double>();
    });
    Table p("where the time goes (--profile: every op timed, warm-up steps left out)");
    p.columns({"op", "calls", "seconds", "share", "FLOP/s"});
    for (const auto& [name, t] : ops)
      p.row({name, format_count(t["calls"].get<int64_t>()), fmt::format("{:.4f}", t["seconds"].get<double>()),
             format_percent(t["share"].get<double>()),
             t["flops"].get<int64_t>() > 0 ? format_si(t["flops_per_s"].get<double>(), "FLOP/s") : "-"});
    os << "\n" << p.render();
  }
}

void print_rank_comm(std::ostream& os, const json& r) {
  if (!r["comm"].empty()) {
    // Bus bandwidth as nccl-tests defines it: algbw × the collective's factor
    // on its group, the factor the rank's "comm_bandwidth" record carries
    // (bench/report/comm_bandwidth.h, from core/collective.h), so that the
    // table and the JSON cannot disagree.
    auto factor = [&](const std::string& key) {
      const auto& bw = r["comm_bandwidth"];
      return bw.contains(key) ? bw[key]["busbw_factor"].get<double>() : 1.0;
    };
    const double steps = std::max<double>(1.0, static_cast<double>(r["time"]["step_ms"].size()));
    Table c("communication per step: measured beside the budget; algbw and busbw (nccl-tests)");
    c.columns({"collective@group", "calls", "budget", "bytes", "budget", "seconds", "algbw", "busbw"});
    for (const auto& [k, v] : r["comm"].items()) {
      const json zero = {{"calls", 0}, {"bytes", 0}};
      const json& a = r["analytic"]["comm"].contains(k) ? r["analytic"]["comm"][k] : zero;
      const double sec = v["seconds"].get<double>();
      const double algbw = sec > 0 ? v["bytes"].get<double>() / sec : 0;
      c.row({k, format_count(static_cast<int64_t>(v["calls"].get<double>() / steps)),
             format_count(a["calls"].get<int64_t>()), b(v["bytes"].get<double>() / steps), b(a["bytes"].get<double>()),
             fmt::format("{:.4f}", sec / steps), sec > 0 ? format_si(algbw, "B/s") : "-",
             sec > 0 ? format_si(algbw * factor(k), "B/s") : "-"});
    }
    os << "\n" << c.render();
  }
}

void print_summary(std::ostream& os, const json& doc) {
  const auto& s = doc["summary"];
  os << "\n";
  Table t("summary");
  t.columns({"quantity", "value"});
  t.row({"steps completed", std::to_string(s["steps_completed"].get<int64_t>())});
  if (!s["loss"].empty())
    t.row({"loss first → last",
           fmt::format("{:.5f} → {:.5f}", s["loss"].front().get<double>(), s["loss"].back().get<double>())});
  if (!doc["ranks"].empty() && doc["ranks"][0].contains("moe"))  // MoE: the first reported rank's drops
    t.row({"MoE dropped choices / step", doc["ranks"][0]["moe"]["dropped_choices_per_step"].dump()});
  t.row({"median step", fmt::format("{:.2f} ms", s["median_step_ms"].get<double>())});
  t.row({"tokens/s", fmt::format("{:.1f}", s["tokens_per_s"].get<double>())});
  t.row({"model FLOPs / step", format_si(s["model_flops_per_step"].get<double>(), "FLOP")});
  t.row({"hardware FLOPs / step", format_si(s["hardware_flops_per_step"].get<double>(), "FLOP")});
  t.row({"peak", s["peak_flops"].is_null() ? "unknown" : format_si(s["peak_flops"].get<double>(), "FLOP/s")});
  t.row({"MFU / HFU", s.contains("mfu_error") ? "ERROR: " + s["mfu_error"].get<std::string>()
                      : s["mfu"].is_null()
                          ? "unknown (no peak)"
                          : format_percent(s["mfu"].get<double>()) + " / " + format_percent(s["hfu"].get<double>())});
  if (s.contains("hardware_peak_source")) {
    t.row({"hardware peak", s["hardware_peak_flops"].is_null()
                                ? "unknown"
                                : format_si(s["hardware_peak_flops"].get<double>(), "FLOP/s")});
    t.row({"MFU (hardware peak)", s.contains("mfu_hardware_error")
                                      ? "ERROR: " + s["mfu_hardware_error"].get<std::string>()
                                  : s["mfu_hardware"].is_null() ? "unknown"
                                                                : format_percent(s["mfu_hardware"].get<double>())});
  }
  t.note("peak source: " + s["peak_source"].get<std::string>());
  if (s.contains("hardware_peak_source")) t.note(s["hardware_peak_source"].get<std::string>());
  os << t.render() << "\n";
  print_checks(os, doc["checks"]);
  if (doc["status"] != "ok") {
    os << fmt::format("\n# FAILED ({}): {}\n", doc["status"].get<std::string>(), doc.value("error", std::string()));
    if (doc.contains("suggestions")) {
      Table f("what would make it fit (analytic totals for this rank's role)");
      f.columns({"change", "total", "fits"});
      for (const auto& sug : doc["suggestions"])
        f.row({sug["change"].get<std::string>(), b(sug["total_bytes"].get<double>()),
               sug["fits"].get<bool>() ? "yes" : "no"});
      os << f.render();
    }
  }
}

}  // namespace

void print_train_summary(std::ostream& os, const json& doc) {
  for (const auto& r : doc["ranks"]) {
    print_rank_accounts(os, r);
    print_rank_published(os, r, doc["config"]["layout"]["dp"].get<double>());
    print_op_time(os, r);
    print_rank_comm(os, r);
  }
  print_summary(os, doc);
}

}  // namespace gpuledger::report
