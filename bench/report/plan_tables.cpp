// Human tables for plan reports, rendered from the JSON document alone (the
// JSON is the result model; this is one printer of it).
#include "bench/report/plan_tables.h"

#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <vector>

#include "bench/report/format.h"
#include "bench/report/plan_summary.h"
#include "bench/report/table.h"
#include "core/account.h"

namespace gpuledger::report {

using nlohmann::json;

namespace {

// " attention=sliding,full (repeating)": the model's per-layer pattern as its file writes it ("" when none).
std::string attention_pattern_text(const nlohmann::json& m) {
  if (!m.contains("attention_pattern")) return "";
  std::vector<std::string> entries;
  for (const auto& e : m["attention_pattern"]) entries.push_back(e.is_string() ? e.get<std::string>() : e.dump());
  const bool repeats = m["attention_pattern"].size() < m["layers"].get<size_t>();
  return fmt::format(" attention={}{}", fmt::join(entries, ","), repeats ? " (repeating)" : "");
}
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
  os << fmt::format("# model   {} ({}): L={} h={} a={} kv={} d={} ffn={} V={} max_seq={} tied={}{}{}\n",
                    m["name"].get<std::string>(), m["flavour"].get<std::string>(), m["layers"].get<int64_t>(),
                    m["hidden"].get<int64_t>(), m["heads"].get<int64_t>(), m["kv_heads"].get<int64_t>(),
                    m["head_dim"].get<int64_t>(), m["ffn"].get<int64_t>(), m["vocab"].get<int64_t>(),
                    m["max_seq"].get<int64_t>(), m["tied_embeddings"].get<bool>(),
                    m["sliding_window"].is_null() ? "" : fmt::format(" window={}", m["sliding_window"].get<int64_t>()),
                    attention_pattern_text(m));
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
  // With --offload optimizer the master and states are in host memory: counted too.
  const double states = model_states_bytes(rank);
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

namespace {

// The published formulas beside the exact figures of one rank class, each
// source once, as a numbered note.
void print_published(std::ostream& os, const json& r, size_t rank_classes) {
  Table pub("published formulas for " + r["role"].get<std::string>() + " (the tightest rank) vs the exact figure");
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
  if (rank_classes > 1)
    pub.note("the other rank classes' comparisons: the report's JSON (--json), or --ranks N for one rank");
  os << pub.render() << "\n";
}

// Calls and bytes per step of each collective, one column per rank class.
void print_comm(std::ostream& os, const json& ranks) {
  Table comm("communication per rank per step (bytes as nccl-tests sizes each call)");
  std::vector<std::string> cols = {"collective@group"};
  std::vector<std::string> keys;
  for (const auto& r : ranks) {
    cols.push_back(r["role"].get<std::string>());
    for (const auto& [key, cc] : r["analytic"]["comm"].items())
      if (std::find(keys.begin(), keys.end(), key) == keys.end()) keys.push_back(key);
  }
  std::sort(keys.begin(), keys.end());
  comm.columns(cols);
  for (const auto& key : keys) {
    std::vector<std::string> row = {key};
    for (const auto& r : ranks) {
      const auto& c = r["analytic"]["comm"];
      row.push_back(c.contains(key) ? fmt::format("{} calls, {}", format_count(c[key]["calls"].get<int64_t>()),
                                                  format_bytes(c[key]["bytes"].get<double>()))
                                    : "-");
    }
    comm.row(row);
  }
  if (keys.empty()) comm.row({"none (one rank per group)"});
  os << comm.render() << "\n";
}

void print_flops_and_time(std::ostream& os, const json& doc) {
  const auto& s = doc["summary"];
  const auto& ranks = doc["ranks"];
  Table fl("FLOPs per step and time estimates");
  fl.columns({"quantity", "value", "note"});
  fl.row({"tokens per step", format_count(s["tokens_per_step"].get<int64_t>()), ""});
  fl.row({"model FLOPs (job)", format_si(s["model_flops_per_step"].get<double>(), "FLOP"),
          "3 × forward GEMMs, full s²; MFU numerator"});
  fl.row({"model FLOPs, causal", format_si(s["model_flops_per_step_causal"].get<double>(), "FLOP"),
          "attention s² terms halved"});
  fl.row({"hardware FLOPs (job)", format_si(s["hardware_flops_per_step"].get<double>(), "FLOP"),
          "with recompute, padded vocab; HFU numerator"});
  int n = 0;
  for (const auto& [name, p] : s["published_flops_per_step"].items()) {
    ++n;
    fl.row({name, format_si(p["flops"].get<double>(), "FLOP"), fmt::format("published [{}]", n)});
    fl.note(fmt::format("[{}] {}", n, p["source"].get<std::string>()));
  }
  for (const auto& r : ranks)
    fl.row({"hardware FLOPs " + r["role"].get<std::string>(),
            format_si(r["flops"]["analytic_hardware"].get<double>(), "FLOP"), "this rank"});
  fl.rule();
  fl.row({"pipeline bubble", format_percent(s["bubble_fraction"].get<double>()),
          doc["config"]["layout"].contains("vpp") ? "(p−1)/(v·m+p−1), v = vpp" : "(p−1)/(m+p−1)"});
  fl.row({"peak", s["peak_flops"].is_null() ? "unknown" : format_si(s["peak_flops"].get<double>(), "FLOP/s"),
          fmt::format("[{}]", ++n)});
  fl.note(fmt::format("[{}] {}", n, s["peak_source"].get<std::string>()));
  fl.row(
      {"step time ≥",
       s["step_time_lower_bound_s"].is_null() ? "unknown" : format_seconds(s["step_time_lower_bound_s"].get<double>()),
       "busiest rank at peak × (m+p−1)/m, comm hidden"});
  fl.row(
      {"training time", s["train_seconds"].is_null() ? "unknown" : format_seconds(s["train_seconds"].get<double>()),
       fmt::format("6·Ψ·{} tokens on {} devices at {} MFU", format_si(s["train_tokens"].get<double>(), ""),
                   doc["config"]["layout"]["world"].get<int64_t>(), format_percent(s["assumed_mfu"].get<double>()))});
  if (s.contains("predicted") && s["predicted"].contains("train_seconds"))
    fl.row({"training time (predicted)", format_seconds(s["predicted"]["train_seconds"].get<double>()),
            fmt::format("the same tokens at the predicted {} tokens/s (below)",
                        format_si(s["predicted"]["tokens_per_s"].get<double>(), ""))});
  os << fl.render();
}

}  // namespace

void print_plan(std::ostream& os, const json& doc, PlanDetail detail) {
  print_config_header(os, doc);
  os << "\n";
  print_plan_summary(os, doc);
  if (detail == PlanDetail::kBrief) return;
  const auto& ranks = doc["ranks"];
  print_accounts_per_role(os, ranks);
  const int tight = tightest_rank_index(doc);
  if (tight >= 0) print_published(os, ranks[static_cast<size_t>(tight)], ranks.size());
  print_comm(os, ranks);
  print_flops_and_time(os, doc);
}

}  // namespace gpuledger::report
