// Human tables for plan reports, rendered from the JSON document alone (the
// JSON is the result model; this is one printer of it).
#include "bench/report/plan_tables.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "bench/report/format.h"
#include "bench/report/table.h"
#include "core/account.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {
std::string bytes_cell(const json& v) {
  const double b = v.get<double>();
  return b == 0 ? std::string("0") : format_bytes(b);
}
}  // namespace

void print_config_header(std::ostream& os, const json& doc) {
  const auto& c = doc["config"];
  const auto& m = c["model"];
  const auto& l = c["layout"];
  const auto& r = c["run"];
  os << fmt::format("# gpuledger {} ({})  kind={}  schema={}\n", doc["tool"]["version"].get<std::string>(),
                    doc["tool"]["git"].get<std::string>(), doc["kind"].get<std::string>(),
                    doc["schema"].get<std::string>());
  os << fmt::format("# model   {} ({}): L={} h={} a={} kv={} d={} ffn={} V={} max_seq={} tied={}{}\n",
                    m["name"].get<std::string>(), m["flavour"].get<std::string>(), m["layers"].get<int64_t>(),
                    m["hidden"].get<int64_t>(), m["heads"].get<int64_t>(), m["kv_heads"].get<int64_t>(),
                    m["head_dim"].get<int64_t>(), m["ffn"].get<int64_t>(), m["vocab"].get<int64_t>(),
                    m["max_seq"].get<int64_t>(), m["tied_embeddings"].get<bool>(),
                    m["sliding_window"].is_null() ? "" : fmt::format(" window={}", m["sliding_window"].get<int64_t>()));
  if (doc.contains("params"))
    os << fmt::format("# params  Ψ = {} (padded vocab V' = {})\n", format_count(doc["params"]["total"].get<int64_t>()),
                      doc["params"].value("padded_vocab", m["vocab"].get<int64_t>()));
  os << fmt::format("# layout  world={} = dp {} × tp {} × pp {}{}, zero {}, sp {}{}\n", l["world"].get<int64_t>(),
                    l["dp"].get<int64_t>(), l["tp"].get<int64_t>(), l["pp"].get<int64_t>(),
                    l.contains("cp") ? fmt::format(" × cp {} (ring attention)", l["cp"].get<int64_t>()) : "",
                    l["zero"].get<int>(), l["sp"].get<bool>() ? "on" : "off",
                    l.contains("vpp") ? fmt::format(", vpp {} (interleaved 1F1B)", l["vpp"].get<int64_t>()) : "");
  if (l.contains("ep"))
    os << fmt::format("# experts ep {}: each rank holds experts / {}, expert-data-parallel groups of dp/ep = {}\n",
                      l["ep"].get<int64_t>(), l["ep"].get<int64_t>(), l["dp"].get<int64_t>() / l["ep"].get<int64_t>());
  os << fmt::format(
      "# run     seq={} mbs={} microbatches={} gbs={} schedule={} recompute={} attention={} dtype={} "
      "grad={} dropout={} optimizer={}\n",
      r["seq"].get<int64_t>(), r["mbs"].get<int64_t>(), r["microbatches"].get<int64_t>(), r["gbs"].get<int64_t>(),
      r["schedule"].get<std::string>(), r["recompute"].get<std::string>(), r["attention"].get<std::string>(),
      r["dtype"].get<std::string>(), r["grad_dtype"].get<std::string>(), r["dropout"].get<double>(),
      r.value("optimizer", std::string("adamw")));
  if (c.contains("device") || c.contains("device_memory_bytes"))
    os << fmt::format("# device  {} ({})\n", c.value("device", std::string("custom")),
                      format_bytes(c.value("device_memory_bytes", 0.0)));
}

// Model states (weights + grads + master + optim) per parameter the rank
// holds: 16 B for mixed-precision AdamW, 12 B for SGD, Adagrad or Lion
// (docs/formulas/memory.md, "Bytes per parameter by optimizer").
namespace {
std::string model_states_per_param_cell(const json& rank) {
  const auto& ex = rank["analytic"]["exact"];
  // With --offload optimizer the master and states are in host memory: counted too.
  const double states = ex["weights"].get<double>() + ex["grads"].get<double>() + ex["master"].get<double>() +
                        ex["optim"].get<double>() + ex.value("host", 0.0);
  const double held = rank["params"].get<double>();
  return held > 0 ? fmt::format("{:.2f} B", states / held) : "-";
}
// The exact accounts per role (docs/exact-budget.md): the device accounts,
// their total, then host memory on its own row.
void print_accounts_per_role(std::ostream& os, const json& ranks) {
  Table acc("bytes per rank by account — exact for this implementation (workspace: upper bound)");
  std::vector<std::string> cols = {"account"};
  for (const auto& r : ranks) cols.push_back(r["role"].get<std::string>());
  acc.columns(cols);
  for (Account a : kAllAccounts) {
    if (!is_device_account(a)) continue;  // host memory: its own row below the device total
    const std::string name(account_name(a));
    std::vector<std::string> row = {name + (a == Account::kWorkspace ? " (≤)" : "")};
    for (const auto& r : ranks) row.push_back(bytes_cell(r["analytic"]["exact"][name]));
    acc.row(row);
  }
  acc.rule();
  std::vector<std::string> total = {"device total"}, host = {"host (not device memory)"};
  std::vector<std::string> params = {"params held"}, inflight = {"microbatches in flight"};
  std::vector<std::string> per_param = {"model states / param"};
  for (const auto& r : ranks) {
    total.push_back(bytes_cell(r["analytic"]["exact"]["total"]));
    host.push_back(bytes_cell(r["analytic"]["exact"].value("host", json(0))));
    params.push_back(format_count(r["params"].get<int64_t>()));
    inflight.push_back(std::to_string(r["in_flight_microbatches"].get<int64_t>()));
    per_param.push_back(model_states_per_param_cell(r));
  }
  acc.row(total).row(host).row(params).row(per_param).row(inflight);
  if (!ranks.empty() && ranks[0].contains("fits")) {
    std::vector<std::string> dev = {"device memory"}, fits = {"fits"};
    for (const auto& r : ranks) {
      dev.push_back(bytes_cell(r["device_bytes"]));
      const double head = r["headroom_bytes"].get<double>();
      fits.push_back(r["fits"].get<bool>() ? "yes, " + format_bytes(head) + " free"
                                           : "NO, over by " + format_bytes(-head));
    }
    acc.row(dev).row(fits);
  }
  os << acc.render() << "\n";
}
}  // namespace

void print_plan(std::ostream& os, const json& doc) {
  print_config_header(os, doc);
  const auto& ranks = doc["ranks"];
  os << "\n";

  print_accounts_per_role(os, ranks);

  // ---- published figures beside the exact ones (sources as numbered notes) ----
  for (const auto& r : ranks) {
    Table pub("published formulas for " + r["role"].get<std::string>() + " vs the exact figure");
    pub.columns({"formula", "published", "exact", "difference", "compared with", "src"});
    int n = 0;
    for (const auto& [name, p] : r["analytic"]["published"].items()) {
      if (!p.contains("exact")) continue;
      ++n;
      pub.row({name, bytes_cell(p["bytes"]), bytes_cell(p["exact"]),
               fmt::format("{:+.1f}%", 100.0 * p["rel_err"].get<double>()), p["compares_to"].get<std::string>(),
               fmt::format("[{}]", n)});
      pub.note(fmt::format("[{}] {}", n, p["source"].get<std::string>()));
    }
    os << pub.render() << "\n";
  }

  // ---- communication per step ----
  Table comm("communication per rank per step (bytes as nccl-tests sizes each call)");
  comm.columns({"rank", "collective@group", "calls", "bytes"});
  for (const auto& r : ranks)
    for (const auto& [kind, cc] : r["analytic"]["comm"].items())
      comm.row({r["role"].get<std::string>(), kind, format_count(cc["calls"].get<int64_t>()),
                format_bytes(cc["bytes"].get<double>())});
  if (ranks.empty() ||
      std::all_of(ranks.begin(), ranks.end(), [](const json& r) { return r["analytic"]["comm"].empty(); }))
    comm.row({"-", "none (one rank per group)", "", ""});
  os << comm.render() << "\n";

  // ---- FLOPs and time ----
  const auto& s = doc["summary"];
  Table fl("FLOPs per step and time estimates");
  fl.columns({"quantity", "value", "note"});
  fl.row({"tokens per step", format_count(s["tokens_per_step"].get<int64_t>()), ""});
  fl.row({"model FLOPs (job)", format_si(s["model_flops_per_step"].get<double>(), "FLOP"),
          "3 × forward GEMMs, full s²; MFU numerator"});
  fl.row({"model FLOPs, causal", format_si(s["model_flops_per_step_causal"].get<double>(), "FLOP"),
          "attention s² terms halved"});
  fl.row({"hardware FLOPs (job)", format_si(s["hardware_flops_per_step"].get<double>(), "FLOP"),
          "with recompute, padded vocab; HFU numerator"});
  for (const auto& [name, p] : s["published_flops_per_step"].items())
    fl.row({name, format_si(p["flops"].get<double>(), "FLOP"), p["source"].get<std::string>()});
  for (const auto& r : ranks)
    fl.row({"hardware FLOPs " + r["role"].get<std::string>(),
            format_si(r["flops"]["analytic_hardware"].get<double>(), "FLOP"), "this rank"});
  fl.rule();
  fl.row({"pipeline bubble", format_percent(s["bubble_fraction"].get<double>()),
          doc["config"]["layout"].contains("vpp") ? "(p−1)/(v·m+p−1), v = vpp" : "(p−1)/(m+p−1)"});
  fl.row({"peak", s["peak_flops"].is_null() ? "unknown" : format_si(s["peak_flops"].get<double>(), "FLOP/s"),
          s["peak_source"].get<std::string>()});
  fl.row(
      {"step time ≥",
       s["step_time_lower_bound_s"].is_null() ? "unknown" : format_seconds(s["step_time_lower_bound_s"].get<double>()),
       "busiest rank at peak × (m+p−1)/m, comm hidden"});
  fl.row(
      {"training time", s["train_seconds"].is_null() ? "unknown" : format_seconds(s["train_seconds"].get<double>()),
       fmt::format("6·Ψ·{} tokens on {} devices at {} MFU", format_si(s["train_tokens"].get<double>(), ""),
                   doc["config"]["layout"]["world"].get<int64_t>(), format_percent(s["assumed_mfu"].get<double>()))});
  if (s.contains("fits"))
    fl.row({"fits", s["fits"].get<bool>() ? "yes: every rank fits" : "NO: some rank does not fit", ""});
  os << fl.render();
}

}  // namespace gpuledger::report
