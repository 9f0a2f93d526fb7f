// The analytic budget of a training run per rank role (see plan_run.h).
#include "bench/run/plan_run.h"

#include <fmt/format.h>

#include <algorithm>

#include "analytic/activations.h"
#include "analytic/model_states.h"
#include "analytic/params.h"
#include "analytic/pipeline.h"
#include "analytic/time_estimate.h"
#include "bench/run/predict_step.h"

namespace gpuledger::run {

std::string role_name(const Layout& l, int64_t rank) {
  const Coords c = l.coords(rank);
  std::string s = fmt::format("r{} pp{}", rank, c.pp);
  if (l.pp > 1) s += c.pp == 0 ? " first" : (c.pp == l.pp - 1 ? " last" : "");
  return s;
}

namespace {

// Device model states: weights, grads, master, optim.
double device_model_state_bytes(const AccountBytes& a) {
  return static_cast<double>(a[Account::kWeights] + a[Account::kGrads] + a[Account::kMaster] + a[Account::kOptim]);
}

// What a published model-state row is compared with: DeepSpeed's offload
// estimator rows (analytic/model_states.h) split GPU ("_offload_gpu": the
// device's model states) from CPU ("_offload_cpu": host memory per node, the
// dp ranks of one node together); every other row counts all model states,
// host memory included (with --offload optimizer the master and optimizer
// state are there).
PublishedComparison model_state_comparison(const analytic::Published& p, const AccountBytes& a, int64_t dp) {
  const auto ends_with = [&](std::string_view tail) {
    return p.name.size() >= tail.size() && p.name.compare(p.name.size() - tail.size(), tail.size(), tail) == 0;
  };
  if (ends_with("_offload_gpu")) return {p, "model_states_device", device_model_state_bytes(a)};
  if (ends_with("_offload_cpu"))
    return {p, "host_per_node", static_cast<double>(a[Account::kHost]) * static_cast<double>(dp)};
  return {p, "model_states", device_model_state_bytes(a) + static_cast<double>(a[Account::kHost])};
}

}  // namespace

PlanRankRecord plan_rank(const ResolvedConfig& c, int64_t rank, std::optional<int64_t> device_bytes) {
  const auto& m = c.model;
  const auto& l = c.layout;
  PlanRankRecord r;
  r.budget = analytic::rank_budget(m, l, c.run, rank);
  r.role = role_name(l, rank);
  r.params = analytic::rank_params(m, l, rank);
  r.device_bytes = device_bytes;
  for (const auto& p : analytic::published_model_states(m, l, c.run, rank))
    r.published.push_back(model_state_comparison(p, r.budget.exact, l.dp));
  // Activations: a per-layer row compares with this code's per-layer bytes
  // without the norm statistics (Table 2 ignores them); whole-stage figures with
  // the activations peak; the other Table 2 rows are reference values for
  // other configurations (no comparison).
  const double acts = static_cast<double>(r.budget.exact[Account::kActivations]);
  const double per_layer = static_cast<double>(analytic::activation_bytes_per_layer(m, l, c.run) -
                                               analytic::norm_stat_bytes_per_layer(m, l, c.run));
  for (const auto& p : analytic::published_activations(m, l, c.run, r.budget.coords.pp)) {
    if (p.name.rfind("korthikanti_table2.", 0) == 0) {
      r.published.push_back({p, "none (Table 2 row for another configuration)", std::nullopt});
    } else if (p.name.find("per_layer") != std::string::npos) {
      r.published.push_back({p, "activations per layer per microbatch, without norm statistics", per_layer});
    } else {
      r.published.push_back({p, "activations", acts});
    }
  }
  return r;
}

namespace {

PlanSummaryRecord plan_summary(const PlanRequest& q) {
  const auto& c = q.config;
  const auto& m = c.model;
  const auto& l = c.layout;
  PlanSummaryRecord s;
  s.params = analytic::model_params(m);
  s.tokens_per_step = c.run.tokens_per_step(l.dp);
  s.job_flops = analytic::job_step_flops(m, l, c.run);
  s.bubble_fraction = analytic::bubble_fraction(l.pp, c.run.microbatches, l.vpp);
  s.published_flops = analytic::published_step_flops(m, l, c.run);
  if (c.device) s.peak_flops = device_peak_flops(*c.device, c.run.dtype, c.run.fp8);
  s.peak_source = c.device ? (s.peak_flops ? c.device->name + " datasheet: " + device_peak_source(*c.device, c.run.fp8)
                                           : c.device->name + ": no published dense peak for this dtype")
                           : "no --device: peak unknown";
  // Step-time lower bound: the busiest rank's hardware FLOPs at peak, stretched by
  // the pipeline's (m + p − 1)/m (Narayanan et al. 2021 §2.2; interleaved
  // (v·m + p − 1)/(v·m), §2.2.2); comm assumed hidden.
  int64_t max_rank_hw = 0;
  for (int64_t rank : analytic::role_ranks(l))
    max_rank_hw = std::max(max_rank_hw, analytic::rank_step_flops(m, l, c.run, rank).hardware);
  if (const auto bound = analytic::step_time_lower_bound_s(max_rank_hw, s.peak_flops)) {
    const double mb = static_cast<double>(c.run.microbatches * l.vpp);
    s.step_time_lower_bound_s = *bound * (mb + l.pp - 1) / mb;
  }
  // Training time for a token budget at an assumed MFU (default 20 tokens per
  // parameter, Hoffmann et al. 2022 "Chinchilla", Table 3).
  const double params = static_cast<double>(s.params);
  s.train_tokens = q.train_tokens.value_or(20.0 * params);
  s.assumed_mfu = q.assumed_mfu;
  if (s.peak_flops)
    s.train_seconds = analytic::training_seconds(params, s.train_tokens, l.world(), *s.peak_flops, q.assumed_mfu);
  return s;
}

}  // namespace

PlanRecord run_plan(const PlanRequest& q) {
  PlanRecord rec;
  rec.config = q.config;
  rec.non_embedding_params = analytic::non_embedding_params(q.config.model);
  rec.padded_vocab = analytic::padded_vocab(q.config.model, q.config.layout.tp);
  for (int64_t rank : q.ranks) rec.ranks.push_back(plan_rank(q.config, rank, q.config.device_memory_bytes));
  rec.summary = plan_summary(q);
  if (q.profiles) {
    try {
      rec.prediction = predict_step(q.config, *q.profiles);
    } catch (const std::exception& e) {
      rec.prediction_error = e.what();
    }
  }
  return rec;
}

}  // namespace gpuledger::run
