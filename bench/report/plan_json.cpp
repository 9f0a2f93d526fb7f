// Plan record → report JSON (see plan_json.h).
#include "bench/report/plan_json.h"

#include <string>

#include "analytic/params.h"
#include "bench/report/prediction_json.h"
#include "bench/report/report.h"

namespace gpuledger::report {

using nlohmann::json;

json plan_rank_json(const run::PlanRankRecord& r) {
  const auto& budget = r.budget;
  json exact = json::object();
  for (Account a : kAllAccounts) exact[std::string(account_name(a))] = budget.exact[a];
  exact["total"] = budget.exact.device_total();  // device memory: every account but host
  json published = json::object();
  for (const auto& p : r.published) {
    json e = {{"bytes", p.figure.value}, {"source", p.figure.source}, {"compares_to", p.compares_to}};
    if (p.exact) {
      e["exact"] = *p.exact;
      e["rel_err"] = *p.exact > 0 ? (p.figure.value - *p.exact) / *p.exact : 0.0;
    }
    published[p.figure.name] = e;
  }
  json comm = json::object();
  for (const auto& [kind, cc] : budget.comm) comm[kind] = {{"calls", cc.calls}, {"bytes", cc.bytes}};
  const Coords& c = budget.coords;
  json j = {{"rank", budget.rank},
            {"coords", {{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}}},
            {"role", r.role},
            {"in_flight_microbatches", budget.in_flight},
            {"params", r.params},
            {"device_total_bytes", budget.exact.device_total()},
            {"host_bytes", budget.exact.host()},
            {"analytic", {{"exact", exact}, {"published", published}, {"comm", comm}}},
            {"flops", {{"analytic_hardware", budget.flops.hardware}, {"analytic_model", budget.flops.model}}}};
  if (c.cp > 0) j["coords"]["cp"] = c.cp;  // only off the first rank of a cp ring: reports without cp stay as they were
  if (r.device_bytes) {
    j["device_bytes"] = *r.device_bytes;
    j["fits"] = budget.exact.device_total() <= *r.device_bytes;
    j["headroom_bytes"] = *r.device_bytes - budget.exact.device_total();
  }
  return j;
}

run::PlanRankRecord plan_rank_from_json(const json& j) {
  run::PlanRankRecord r;
  auto& budget = r.budget;
  budget.rank = j.at("rank").get<int64_t>();
  const json& c = j.at("coords");
  budget.coords = {c.at("dp").get<int64_t>(), c.at("tp").get<int64_t>(), c.at("pp").get<int64_t>(),
                   c.value("cp", int64_t{0})};
  r.role = j.at("role").get<std::string>();
  budget.in_flight = j.at("in_flight_microbatches").get<int64_t>();
  r.params = j.at("params").get<int64_t>();
  const json& a = j.at("analytic");
  for (Account acc : kAllAccounts) {
    // A report written before the host account existed held no host memory.
    if (acc == Account::kHost && !a.at("exact").contains("host")) continue;
    budget.exact[acc] = a.at("exact").at(std::string(account_name(acc))).get<int64_t>();
  }
  for (const auto& [name, e] : a.at("published").items()) {
    run::PublishedComparison p{{name, e.at("bytes").get<double>(), e.at("source").get<std::string>()},
                               e.at("compares_to").get<std::string>(),
                               std::nullopt};
    if (e.contains("exact")) p.exact = e["exact"].get<double>();
    r.published.push_back(std::move(p));
  }
  for (const auto& [kind, cc] : a.at("comm").items())
    budget.comm[kind] = {cc.at("calls").get<int64_t>(), cc.at("bytes").get<int64_t>()};
  budget.flops.hardware = j.at("flops").at("analytic_hardware").get<int64_t>();
  budget.flops.model = j.at("flops").at("analytic_model").get<int64_t>();
  if (j.contains("device_bytes")) r.device_bytes = j["device_bytes"].get<int64_t>();
  return r;
}

namespace {

json plan_summary_json(const run::PlanSummaryRecord& s) {
  json j;
  j["params"] = s.params;
  j["tokens_per_step"] = s.tokens_per_step;
  j["model_flops_per_step"] = s.job_flops.model;
  j["hardware_flops_per_step"] = s.job_flops.hardware;
  j["model_flops_per_step_causal"] = s.job_flops.model_causal;
  j["attention_flops_convention"] =
      "full s^2 (PaLM App. B and most published MFU figures); model_flops_per_step_causal halves the "
      "attention score and context products";
  j["bubble_fraction"] = s.bubble_fraction;
  json pub = json::object();
  for (const auto& p : s.published_flops) pub[p.name] = {{"flops", p.value}, {"source", p.source}};
  j["published_flops_per_step"] = pub;
  j["peak_flops"] = optional_json(s.peak_flops);
  j["peak_source"] = s.peak_source;
  j["step_time_lower_bound_s"] = optional_json(s.step_time_lower_bound_s);
  j["train_tokens"] = s.train_tokens;
  j["assumed_mfu"] = s.assumed_mfu;
  j["train_seconds"] = optional_json(s.train_seconds);
  return j;
}

}  // namespace

json plan_report_json(const run::PlanRecord& record) {
  const auto& c = record.config;
  json doc = make_report("plan");
  doc["env"]["backend"] = "analytic";
  doc["env"]["world"] = c.layout.world();
  doc["env"]["device"] = c.device_label();
  doc["config"] = config_json(c);
  doc["params"] = {{"total", record.summary.params},
                   {"non_embedding", record.non_embedding_params},
                   {"padded_vocab", record.padded_vocab}};
  doc["ranks"] = json::array();
  bool all_fit = true;
  for (const auto& r : record.ranks) {
    doc["ranks"].push_back(plan_rank_json(r));
    if (r.device_bytes && r.budget.exact.device_total() > *r.device_bytes) all_fit = false;
  }
  doc["summary"] = plan_summary_json(record.summary);
  if (c.device_memory_bytes) doc["summary"]["fits"] = all_fit;
  if (const auto& p = record.prediction) {
    doc["prediction"] = prediction_json(*p);
    doc["summary"]["predicted"] = predicted_summary_json(*p);
    // The token budget at the predicted rate, beside the assumed-MFU estimate.
    if (p->tokens_per_s > 0)
      doc["summary"]["predicted"]["train_seconds"] = record.summary.train_tokens / p->tokens_per_s;
  } else if (!record.prediction_error.empty()) {
    doc["summary"]["predicted"] = {{"error", record.prediction_error}};
  }
  return doc;
}

}  // namespace gpuledger::report
