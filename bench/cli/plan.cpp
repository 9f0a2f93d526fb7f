// `gpuledger plan`: the analytic budget per rank role for a model, layout and
// run — bytes by account (exact for this implementation) beside the published
// formulas, communication per step, FLOPs, bubble, time estimates, and whether
// it fits on --device. Nothing is allocated; see docs/exact-budget.md and
// docs/formulas/ for every figure.
#include <CLI/CLI.hpp>
#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <memory>
#include <ostream>

#include "bench/cli/commands.h"
#include "bench/cli/plan_report.h"
#include "bench/report/format.h"
#include "bench/report/report.h"
#include "bench/report/table.h"
#include "analytic/activations.h"
#include "analytic/budget.h"
#include "analytic/model_states.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "analytic/time_estimate.h"

namespace gpuledger::cli {

using nlohmann::json;
using report::format_bytes;
using report::format_count;

namespace {

std::string role_name(const Layout& l, int64_t rank) {
  const Coords c = l.coords(rank);
  std::string s = fmt::format("r{} pp{}", rank, c.pp);
  if (l.pp > 1) s += c.pp == 0 ? " first" : (c.pp == l.pp - 1 ? " last" : "");
  return s;
}

double model_state_bytes_sum(const AccountBytes& a) {
  return static_cast<double>(a[Account::kWeights] + a[Account::kGrads] + a[Account::kMaster] +
                             a[Account::kOptim]);
}

}  // namespace

json plan_rank_json(const Resolved& r, int64_t rank, std::optional<int64_t> device_bytes) {
  const auto& m = r.model;
  const auto& l = r.layout;
  const auto budget = analytic::rank_budget(m, l, r.run, rank);
  const Coords c = l.coords(rank);
  json exact = json::object();
  for (Account a : kAllAccounts) exact[std::string(account_name(a))] = budget.exact[a];
  exact["total"] = budget.exact.total();

  json published = json::object();
  const double states = model_state_bytes_sum(budget.exact);
  for (const auto& p : analytic::published_model_states(m, l, r.run, rank))
    published[p.name] = {{"bytes", p.value}, {"source", p.source}, {"compares_to", "model_states"},
                         {"exact", states},
                         {"rel_err", states > 0 ? (p.value - states) / states : 0.0}};
  // Activations: a per-layer row compares with this code's per-layer bytes
  // without the norm statistics (Table 2 ignores them); whole-stage figures with
  // the activations peak; the other Table 2 rows are reference values for
  // other configurations (no comparison).
  const double acts = static_cast<double>(budget.exact[Account::kActivations]);
  const double per_layer = static_cast<double>(analytic::activation_bytes_per_layer(m, l, r.run) -
                                               analytic::norm_stat_bytes_per_layer(m, l, r.run));
  for (const auto& p : analytic::published_activations(m, l, r.run, c.pp)) {
    json e = {{"bytes", p.value}, {"source", p.source}};
    if (p.name.rfind("korthikanti_table2.", 0) == 0) {
      e["compares_to"] = "none (Table 2 row for another configuration)";
    } else {
      const bool layer = p.name.find("per_layer") != std::string::npos;
      const double exact_v = layer ? per_layer : acts;
      e["compares_to"] = layer ? "activations per layer per microbatch, without norm statistics" : "activations";
      e["exact"] = exact_v;
      e["rel_err"] = exact_v > 0 ? (p.value - exact_v) / exact_v : 0.0;
    }
    published[p.name] = e;
  }

  json comm = json::object();
  for (const auto& [kind, cc] : budget.comm) comm[kind] = {{"calls", cc.calls}, {"bytes", cc.bytes}};

  json j = {{"rank", rank},
            {"coords", {{"dp", c.dp}, {"tp", c.tp}, {"pp", c.pp}}},
            {"role", role_name(l, rank)},
            {"in_flight_microbatches", budget.in_flight},
            {"params", analytic::rank_params(m, l, rank)},
            {"analytic", {{"exact", exact}, {"published", published}, {"comm", comm}}},
            {"flops", {{"analytic_hardware", budget.flops.hardware}, {"analytic_model", budget.flops.model}}}};
  if (device_bytes) {
    j["device_bytes"] = *device_bytes;
    j["fits"] = budget.exact.total() <= *device_bytes;
    j["headroom_bytes"] = *device_bytes - budget.exact.total();
  }
  return j;
}

json plan_summary_json(const Resolved& r, const Options& o) {
  const auto& m = r.model;
  const auto& l = r.layout;
  const auto job = analytic::job_step_flops(m, l, r.run);
  json s;
  s["params"] = analytic::model_params(m);
  s["tokens_per_step"] = r.run.tokens_per_step(l.dp);
  s["model_flops_per_step"] = job.model;
  s["hardware_flops_per_step"] = job.hardware;
  s["model_flops_per_step_causal"] = job.model_causal;
  s["attention_flops_convention"] =
      "full s^2 (PaLM App. B and most published MFU figures); model_flops_per_step_causal halves the "
      "attention score and context products";
  s["bubble_fraction"] = analytic::bubble_fraction(l.pp, r.run.microbatches);
  json pub = json::object();
  for (const auto& p : analytic::published_step_flops(m, l, r.run))
    pub[p.name] = {{"flops", p.value}, {"source", p.source}};
  s["published_flops_per_step"] = pub;

  std::optional<double> peak;
  if (r.device) peak = device_peak_flops(*r.device, r.run.dtype);
  s["peak_flops"] = peak ? json(*peak) : json(nullptr);
  s["peak_source"] = r.device ? (peak ? r.device->name + " datasheet: " + r.device->source
                                      : r.device->name + ": no published dense peak for this dtype")
                              : "no --device: peak unknown";
  // Step-time lower bound: the busiest rank's hardware FLOPs at peak, stretched by
  // the pipeline's (m + p − 1)/m (Narayanan et al. 2021 §2.2); comm assumed hidden.
  int64_t max_rank_hw = 0;
  for (int64_t rank : analytic::role_ranks(l))
    max_rank_hw = std::max(max_rank_hw, analytic::rank_step_flops(m, l, r.run, rank).hardware);
  const auto bound = analytic::step_time_lower_bound_s(max_rank_hw, peak);
  if (bound) {
    const double m_ = static_cast<double>(r.run.microbatches);
    s["step_time_lower_bound_s"] = *bound * (m_ + l.pp - 1) / m_;
  } else {
    s["step_time_lower_bound_s"] = nullptr;
  }
  // Training time for a token budget at an assumed MFU (default 20 tokens per
  // parameter, Hoffmann et al. 2022 "Chinchilla", Table 3).
  const double params = static_cast<double>(s["params"].get<int64_t>());
  const double tokens = o.train_tokens.empty() ? 20.0 * params : static_cast<double>(parse_size(o.train_tokens));
  s["train_tokens"] = tokens;
  s["assumed_mfu"] = o.assumed_mfu;
  if (peak)
    s["train_seconds"] = analytic::training_seconds(params, tokens, l.world(), *peak, o.assumed_mfu);
  else
    s["train_seconds"] = nullptr;
  return s;
}

namespace {

int run_plan(const Options& o) {
  const Resolved r = resolve(o);
  const auto& m = r.model;
  const auto& l = r.layout;
  const auto ranks = select_ranks(o.ranks, l, l.world());

  json doc = report::make_report("plan");
  doc["env"]["backend"] = "analytic";
  doc["env"]["world"] = l.world();
  doc["env"]["device"] = r.device ? r.device->name : (r.device_memory_bytes ? "custom" : "none");
  doc["config"] = report::config_json(r);
  doc["params"] = {{"total", analytic::model_params(m)},
                   {"non_embedding", analytic::non_embedding_params(m)},
                   {"padded_vocab", analytic::padded_vocab(m, l.tp)}};
  doc["ranks"] = json::array();
  bool all_fit = true;
  for (int64_t rank : ranks) {
    doc["ranks"].push_back(plan_rank_json(r, rank, r.device_memory_bytes));
    if (r.device_memory_bytes && !doc["ranks"].back()["fits"].get<bool>()) all_fit = false;
  }
  doc["summary"] = plan_summary_json(r, o);
  if (r.device_memory_bytes) doc["summary"]["fits"] = all_fit;

  if (!o.json_path.empty()) report::write_report(doc, o.json_path);
  if (!o.quiet) print_plan(table_stream(o), doc);
  return 0;
}

}  // namespace

void add_plan_command(CLI::App& root, std::vector<Command>& out) {
  auto opts = std::make_shared<Options>();  // CLI11 binds to it; the run closure keeps it alive
  auto* app = root.add_subcommand(
      "plan", "analytic per-rank budget (bytes by account, comm, FLOPs) and whether it fits a device");
  add_model_options(*app, *opts);
  add_layout_options(*app, *opts);
  add_run_options(*app, *opts);
  add_device_options(*app, *opts);
  app->add_option("--train-tokens", opts->train_tokens,
                  "token budget for the training-time estimate (default 20 per parameter)")
      ->group("Estimate");
  app->add_option("--assumed-mfu", opts->assumed_mfu, "MFU assumed by the training-time estimate")
      ->capture_default_str()->check(CLI::Range(0.01, 1.0))->group("Estimate");
  add_output_options(*app, *opts);
  out.push_back({app, [opts]() { return run_plan(*opts); }});
}

}  // namespace gpuledger::cli
